"""The experiment's figures: quality reversals counted as the issue defines them."""

from autotune_app.animation import reversals


def test_a_raise_lowered_within_the_window_is_one_reversal() -> None:
    """Raised at step 1, lowered at step 3: one; a raise lowered only after the window, or a
    drop followed by a raise, is none; each knob counts on its own."""
    assert reversals({"ao": [4, 5, 5, 4]}, window=2) == 1
    assert reversals({"ao": [4, 5, 5, 5, 4]}, window=2) == 0
    assert reversals({"ao": [5, 4, 5, 5]}, window=2) == 0
    assert reversals({"ao": [4, 5, 4], "shadows": [0, 1, 0]}, window=10) == 2
    assert reversals({"ao": [4, 5, 6, 5]}, window=10) == 2  # both raises are taken back
