#!/usr/bin/env bash
# The files of a raftsched cluster on real machines (docs/deploy.md): run it on one trusted machine
# (not a node), then copy OUT/hosts/<id>/ to /etc/raftsched/ on machine <id>.
#
#   cluster_files.sh new OUT n1=10.0.0.1 n2=10.0.0.2 n3=10.0.0.3
#       a new cluster: a CA (OUT/pki; ca.key never leaves OUT), a certificate per node naming its
#       address, the Raft secret, the tokens (OUT/tokens/*.token: ops and backup = admin, executors,
#       join = reader, for a new member's --join),
#       OUT/cluster.toml (the same on every machine) and OUT/hosts/<id>/ for each machine
#   cluster_files.sh add OUT n4=10.0.0.4 [JOIN]
#       one more machine for the cluster made in OUT: its certificate and OUT/hosts/n4/, with a
#       node.env that starts it with --join JOIN (default: the gRPC addresses of [[nodes]]); prints
#       the `raftsched cluster add-node` command to run before the new node starts
#   cluster_files.sh config n1=10.0.0.1 n2=10.0.0.2 n4=10.0.0.4
#       cluster.toml for these members on standard output: after a replacement, the current members
#       (executors and clients with --config read their node addresses from it)
#
# Environment (defaults): RAFTSCHED (raftsched: the command), DATA_DIR (/var/lib/raftsched),
# LOGS_DIR (/var/lib/raftsched-logs), ETC_DIR (/etc/raftsched: where hosts/<id>/ goes; named in
# node.env), RAFT_PORT (7001), GRPC_PORT (50051), HTTP_PORT (8081). Nothing existing is overwritten.
set -euo pipefail

RAFTSCHED="${RAFTSCHED:-raftsched}"
DATA_DIR="${DATA_DIR:-/var/lib/raftsched}"
LOGS_DIR="${LOGS_DIR:-/var/lib/raftsched-logs}"
ETC_DIR="${ETC_DIR:-/etc/raftsched}"
RAFT_PORT="${RAFT_PORT:-7001}"
GRPC_PORT="${GRPC_PORT:-50051}"
HTTP_PORT="${HTTP_PORT:-8081}"

die() { echo "cluster_files.sh: $*" >&2; exit 2; }
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }

need_raftsched() {
  command -v "$RAFTSCHED" >/dev/null || die "no '$RAFTSCHED' command: install raftsched (docs/deploy.md, step 1) or set RAFTSCHED"
}

# id=address -> id and address, checked
split_host() {
  local pair="$1"
  [[ "$pair" == *=* ]] || die "expected ID=ADDRESS (e.g. n1=10.0.0.1), got '$pair'"
  host_id="${pair%%=*}"
  host_addr="${pair#*=}"
  [[ "$host_id" =~ ^[A-Za-z0-9._-]+$ ]] || die "node id '$host_id': use letters, digits, '.', '_' or '-'"
  [ -n "$host_addr" ] || die "no address for node $host_id"
}

# the cluster.toml every machine gets (the first membership: [[nodes]] of these ids and addresses)
write_config() {
  local out="$1"
  shift
  {
    cat <<EOF
# raftsched cluster.toml: the same file on every machine ($ETC_DIR/cluster.toml).
# Reference: docs/config.md. Relative paths are next to this file.
[cluster]
# each node keeps its files in $DATA_DIR/<node id>
data_dir = "$DATA_DIR"
# the Raft secret: the same on every node, owner-only (chmod 600)
secret_file = "raft.secret"

# Nodes read [[nodes]] only at their first start: the membership then lives in the Raft log (raftsched
# cluster add-node / remove-node). Executors and clients started with --config dial these nodes.
# raft: reachable by the other nodes only (firewall); grpc: clients and executors;
# http: HTTPS (under [tls]) with /metrics and /healthz, for Prometheus and probes.
EOF
    local pair
    for pair in "$@"; do
      split_host "$pair"
      cat <<EOF

[[nodes]]
id = "$host_id"
raft = "$host_addr:$RAFT_PORT"
grpc = "$host_addr:$GRPC_PORT"
http = "$host_addr:$HTTP_PORT"
EOF
    done
    cat <<EOF

# Run output as files: executors on this machine write them here, this node reads them from here.
# Executors on other machines need store = "s3" (docs/deploy.md, step 6).
[logs]
store = "local"
dir = "$LOGS_DIR"

[tls]
cert_file = "certs/{node_id}.crt"
key_file = "certs/{node_id}.key"
ca_file = "certs/ca.crt"

[auth]
tokens_file = "tokens.toml"
EOF
  } >"$out"
}

new_token() { # name file roles...
  local name="$1" file="$2"
  shift 2
  local args=()
  local role
  for role in "$@"; do args+=(--role "$role"); done
  local said
  said="$("$RAFTSCHED" token create --name "$name" "${args[@]}" --out "$file" 2>&1 >>"$OUT/tokens.toml")" || die "$said"
}

# OUT/hosts/<id>/: what goes to $ETC_DIR on that machine
host_bundle() {
  local id="$1" dir="$OUT/hosts/$1"
  [ ! -e "$dir" ] || die "$dir already exists: move it away first"
  install -d -m 755 "$dir" "$dir/certs" # executors read cluster.toml and the CA
  install -m 644 "$OUT/cluster.toml" "$dir/cluster.toml"
  install -m 600 "$OUT/raft.secret" "$OUT/tokens.toml" "$OUT/tokens/join.token" "$OUT/tokens/executors.token" "$dir/"
  install -m 644 "$OUT/pki/ca.crt" "$OUT/pki/$id.crt" "$dir/certs/"
  install -m 600 "$OUT/pki/$id.key" "$dir/certs/"
}

cmd_new() {
  [ $# -ge 2 ] || usage
  OUT="$1"
  shift
  [ ! -e "$OUT/cluster.toml" ] || die "$OUT/cluster.toml already exists: this is for a new cluster (use add for one more machine)"
  local pair
  for pair in "$@"; do split_host "$pair"; done
  need_raftsched
  mkdir -p "$OUT/tokens"
  chmod 700 "$OUT" "$OUT/tokens"
  "$RAFTSCHED" tls ca --dir "$OUT/pki" >/dev/null
  for pair in "$@"; do
    split_host "$pair"
    "$RAFTSCHED" tls cert --dir "$OUT/pki" --name "$host_id" --host "$host_addr" >/dev/null
  done
  (umask 077 && head -c 48 /dev/urandom | base64 -w0 >"$OUT/raft.secret" && echo >>"$OUT/raft.secret")
  (umask 077 && : >"$OUT/tokens.toml")
  new_token ops "$OUT/tokens/ops.token" admin
  new_token executors "$OUT/tokens/executors.token" executor reader
  new_token join "$OUT/tokens/join.token" reader
  new_token backup "$OUT/tokens/backup.token" admin
  write_config "$OUT/cluster.toml" "$@"
  for pair in "$@"; do
    split_host "$pair"
    host_bundle "$host_id"
  done
  echo "made $OUT: copy $OUT/hosts/<id>/ to $ETC_DIR/ on each machine (docs/deploy.md, step 3)"
  echo "your admin token: $OUT/tokens/ops.token; the CA for clients: $OUT/pki/ca.crt"
}

cmd_add() {
  [ $# -ge 2 ] && [ $# -le 3 ] || usage
  OUT="$1"
  split_host "$2"
  [ -f "$OUT/cluster.toml" ] || die "$OUT/cluster.toml not found: run cluster_files.sh new first"
  need_raftsched
  [ ! -e "$OUT/hosts/$host_id" ] || die "$OUT/hosts/$host_id already exists: a new machine needs a new node id"
  local join="${3:-}"
  if [ -z "$join" ]; then
    join="$(sed -n 's/^grpc = "\([^"]*\)".*/\1/p' "$OUT/cluster.toml" | paste -sd, -)"
  fi
  "$RAFTSCHED" tls cert --dir "$OUT/pki" --name "$host_id" --host "$host_addr" >/dev/null
  host_bundle "$host_id"
  printf 'RAFTSCHED_NODE_ARGS=--join %s\nRAFTSCHED_TOKEN_FILE=%s/join.token\n' "$join" "$ETC_DIR" >"$OUT/hosts/$host_id/node.env"
  echo "made $OUT/hosts/$host_id: copy it to $ETC_DIR/ on the new machine; before starting its node, run (ops token):"
  echo "raftsched cluster add-node --id $host_id --raft $host_addr:$RAFT_PORT --grpc $host_addr:$GRPC_PORT --http $host_addr:$HTTP_PORT"
}

cmd_config() {
  [ $# -ge 1 ] || usage
  local pair
  for pair in "$@"; do split_host "$pair"; done
  write_config /dev/stdout "$@"
}

case "${1:-}" in
  new) shift; cmd_new "$@" ;;
  add) shift; cmd_add "$@" ;;
  config) shift; cmd_config "$@" ;;
  *) usage ;;
esac
