"""``python -m lowering IN.onnx OUT.onnx``: load, lower, save, report."""

import sys

from lowering.cli import main

sys.exit(main())
