"""The metric Space: evaluate's stock widget around tcmqa_metric.py, which sits beside this file.

The guard keeps `pytest --doctest-modules` from launching it; the Space runs `python app.py`.
"""

from pathlib import Path

import evaluate
from evaluate.utils import launch_gradio_widget

if __name__ == "__main__":
    launch_gradio_widget(evaluate.load(str(Path(__file__).with_name("tcmqa_metric.py"))))
