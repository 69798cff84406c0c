import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

# The e2e tier (tests/e2e) needs a local control plane: it runs under `make e2e` only.
if not os.environ.get("POOLGUARD_E2E"):
    collect_ignore = ["e2e"]
