"""Failure specifications: parsing, validation, firing once."""

from __future__ import annotations

import pytest

from falkirk.spark import Injection, PipelineError, StepFailure
from falkirk.spark.pipeline.run.failures import Injector


@pytest.mark.parametrize(("text", "where"), [("cc@7", "mid"), ("cc@7:before", "before"), ("heavy@0:job", "job"),
                                             ("a_b@12:kill-mid", "kill-mid")])
def test_parse(text: str, where: str) -> None:
    """STEP@EPOCH[:WHERE] parses; the default point is mid."""
    inj = Injection.parse(text)
    assert (inj.where, str(inj)) == (where, f"{text.split(':')[0]}:{where}")


@pytest.mark.parametrize("text", ["cc", "cc@", "cc@-1", "@3", "cc@3:later"])
def test_parse_rejects(text: str) -> None:
    """Malformed specifications are rejected with the expected syntax."""
    with pytest.raises(PipelineError, match="STEP@EPOCH"):
        Injection.parse(text)


def test_fires_once_at_its_point() -> None:
    """An injection fires at its step, epoch and point only, and only once."""
    inj = Injector(["cc@2:before"])
    inj.at("cc", 2, "mid")
    inj.at("cc", 1, "before")
    with pytest.raises(StepFailure, match="step cc failed at epoch 2"):
        inj.at("cc", 2, "before")
    inj.at("cc", 2, "before")
    assert [str(i) for i in inj.fired] == ["cc@2:before"] and not inj.pending


def test_unknown_step_is_rejected() -> None:
    """Failures naming a step the pipeline does not have are refused up front."""
    with pytest.raises(PipelineError, match="unknown step 'nope'"):
        Injector("nope@1").validate(["cc", "heavy"])
