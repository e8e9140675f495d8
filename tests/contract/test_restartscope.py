"""Which members restart when a program fails: the rule both sides read (task/policy.py acts on it, the
JobSet export writes it)."""

import pytest

from marathon_tf.contract.restartscope import UNEXECUTABLE_CODES, group_scope


@pytest.mark.parametrize("style, group", [
    ("tf1", {"ps"}), ("parameter_server", {"ps"}), ("custom", {"ps"}),
    ("multi_worker_mirrored", {"chief", "worker"})])
def test_a_ps_and_a_mirrored_group_restart_every_member(style, group):
    for role in ("chief", "ps", "worker", "evaluator"):
        assert group_scope(style, role, 5) is (role in group), role
        assert group_scope(style, role, 1) is False  # a job of one member has no group


def test_the_task_side_and_the_export_read_the_contracts_rule():
    from marathon_tf.task import policy
    from marathon_tf.user.targets import jobset

    assert policy.group_scope is group_scope and jobset.group_scope is group_scope
    assert policy.UNEXECUTABLE_CODES is jobset.UNEXECUTABLE_CODES is UNEXECUTABLE_CODES == (126, 127)
    assert policy.restart_scope("tf1", "ps", 3, rounds=True) == policy.GROUP
    assert policy.restart_scope("tf1", "worker", 3, rounds=True) == policy.SELF
