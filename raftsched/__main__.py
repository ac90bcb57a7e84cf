"""``python -m raftsched``: the ``raftsched`` command."""

import sys

from raftsched.cluster.app.main import main

sys.exit(main())
