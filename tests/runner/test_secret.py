"""The run's noise secret: unguessable, kept by the client only, the same for a resumed run and
new for ``--fresh`` (a release drawn without it could be regenerated from the public seeds)."""

from __future__ import annotations

import stat

from dpkit.runner.secret import FILE, noise_secret


def test_a_new_run_gets_a_random_256_bit_secret_only_its_owner_can_read(tmp_path):
    out = tmp_path / "runs" / "first"  # the output folder need not exist yet
    value = noise_secret(out)
    assert len(bytes.fromhex(value)) >= 32
    assert stat.S_IMODE((out / FILE).stat().st_mode) == 0o600
    assert noise_secret(tmp_path / "other") != value  # each run folder its own secret
    assert sorted(p.name for p in out.iterdir()) == [FILE]  # no temporary file left behind


def test_a_resumed_run_reads_back_the_same_secret(tmp_path):
    value = noise_secret(tmp_path)
    assert noise_secret(tmp_path) == value
    assert noise_secret(tmp_path, renew=False) == value


def test_fresh_replaces_the_secret_and_the_next_resume_keeps_the_new_one(tmp_path):
    old = noise_secret(tmp_path)
    new = noise_secret(tmp_path, renew=True)
    assert new != old
    assert noise_secret(tmp_path) == new
    assert stat.S_IMODE((tmp_path / FILE).stat().st_mode) == 0o600


def test_a_longer_temporary_file_left_by_an_interrupted_write_does_not_leak_into_the_secret(
        tmp_path):
    (tmp_path / (FILE + ".tmp")).write_text("f" * 500 + "\n")
    value = noise_secret(tmp_path)
    assert noise_secret(tmp_path) == value
    assert (tmp_path / FILE).read_text() == value + "\n"


def test_a_temporary_file_left_readable_by_others_never_makes_the_secret_readable(tmp_path):
    stale = tmp_path / (FILE + ".tmp")
    stale.write_text("stale\n")
    stale.chmod(0o644)
    noise_secret(tmp_path)
    assert stat.S_IMODE((tmp_path / FILE).stat().st_mode) == 0o600
