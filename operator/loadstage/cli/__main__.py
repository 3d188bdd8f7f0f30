import sys

from loadstage.cli import main

sys.exit(main())
