#!/bin/sh
# Create the benchmark-only environments, outside the project's own venv:
#   - the baseline venv with Ironic 39 (its pxe_filter is what we compare against),
#   - the plotting venv with matplotlib (never a project dependency).
# Usage: bench/setup_baseline.sh [BASELINE_VENV] [PLOT_VENV]
set -eu
BASELINE_VENV=${1:-.venvs/ironic39}
PLOT_VENV=${2:-.venvs/plot}
PYTHON=${PYTHON:-python3}

if ! "$BASELINE_VENV/bin/python" -c 'import ironic.pxe_filter.service' 2>/dev/null; then
    "$PYTHON" -m venv "$BASELINE_VENV"
    "$BASELINE_VENV/bin/pip" install --quiet 'ironic==39.*'
fi
"$BASELINE_VENV/bin/pip" show ironic | sed -n 's/^Version: /Ironic /p'

if ! "$PLOT_VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then
    "$PYTHON" -m venv "$PLOT_VENV"
    "$PLOT_VENV/bin/pip" install --quiet matplotlib
fi
"$PLOT_VENV/bin/python" -c 'import matplotlib; print("matplotlib", matplotlib.__version__)'
