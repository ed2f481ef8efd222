"""What a GPU machine keeps of a run's upload (`.upload/state.json`): whole on disk, whichever of
`div run`'s threads writes it (the uploader as it sends, the supervisor as the command ends)."""

from __future__ import annotations

import threading

from telemetry.uploading import State


def test_the_state_saved_by_two_threads_at_once_is_always_whole(tmp_path):
    state = State("http://127.0.0.1:8000", "run-7", exit_code=0)
    failed: list[OSError] = []

    def save_often() -> None:
        try:
            for _ in range(300):
                state.save(tmp_path)
        except OSError as e:
            failed.append(e)

    threads = [threading.Thread(target=save_often) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failed == []
    assert State.load(tmp_path) == state
    assert [p.name for p in (tmp_path / ".upload").iterdir()] == ["state.json"]
