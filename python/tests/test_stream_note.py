"""The re-run the other way (SPEC.md section 7, "Streams") as nc.check decides it, without a GPU:
which failures of a CUDA kernel are run again with torch's current stream the other one, and what
the text says when that passes."""
import types

import pytest

from nvfp4check import _capi, driver


def failed(check, memory="cuda", stream="current"):
    adapter = types.SimpleNamespace(memory=memory, stream_mode=stream)
    failure = types.SimpleNamespace(check=check, case_file="case.txt")
    return adapter, types.SimpleNamespace(failure=failure)


def rerun(verdict, seen):
    def replay_one(path):
        seen.append(path)
        return types.SimpleNamespace(verdict=verdict)

    return replay_one


@pytest.mark.parametrize("check", ["oracle", "determinism", "stale-state", "unwritten-output", "stream"])
def test_a_race_is_named_when_the_other_stream_passes(check):
    seen = []
    adapter, report = failed(check)
    note = driver._other_stream_note(adapter, report, rerun("pass", seen))
    assert seen == ["case.txt"] and adapter.stream_mode == "current"
    assert note.startswith("the same case, run again with stream='legacy', passed: ")
    assert "not ordered after the work it put on torch's current stream" in note
    assert ("race between two streams" in note) == (check == "oracle")


def test_legacy_failures_name_the_other_ordering():
    adapter, report = failed("oracle", stream="legacy")
    note = driver._other_stream_note(adapter, report, rerun("pass", []))
    assert "run again with stream='current', passed" in note and "legacy default stream" in note


@pytest.mark.parametrize("check,memory,verdict", [
    ("oracle", "cuda", "fail"),       # fails the other way too: not (only) the streams
    ("oracle", "host", "pass"),       # host kernels have no streams
    ("inputs-modified", "cuda", "pass"),
    ("guard", "cuda", "pass"),
])
def test_other_failures_get_no_note(check, memory, verdict):
    seen = []
    adapter, report = failed(check, memory)
    assert driver._other_stream_note(adapter, report, rerun(verdict, seen)) is None
    assert bool(seen) == (check == "oracle" and memory == "cuda")


def test_the_note_is_the_programs_own_text():
    # One text for `nvfp4check run --python` and nc.check: only the way the re-run is asked for differs.
    capi = _capi.load()
    python = capi.stream_note("oracle", "current", "stream='legacy'")
    program = capi.stream_note("oracle", "current", "--stream legacy")
    assert python.replace("stream='legacy'", "--stream legacy") == program
    assert "work the function put on the legacy default stream" in python
    assert capi.stream_note("guard", "current", "stream='legacy'") == ""
