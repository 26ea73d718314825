"""TCMQA leaderboard Space (gradio 6): the entry point the Space runs. The UI is
:mod:`tcmqa.leaderboard.space`, the start-up (store, worker, publisher) :mod:`tcmqa.leaderboard.hosted`.

Locally (no ``SPACE_ID``) the app starts one worker itself, accepts local model folders and needs no
Hugging Face sign-in (it listens on 127.0.0.1 unless ``TCMQA_ADMIN_TOKEN`` is set)::

    python space/app.py            # or: tcmqa serve
"""

from tcmqa.leaderboard.hosted import main

if __name__ == "__main__":
    main()
