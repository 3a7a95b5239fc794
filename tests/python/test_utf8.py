# SPDX-License-Identifier: MIT
"""Text that is not valid UTF-8 (in Python, a lone surrogate such as the "surrogateescape" form
of a stray byte) is refused with a mambacpp.Error that says so, never repaired, and the model
answers the next request as if the bad one had never come."""

import pytest

import mambacpp


def test_text_that_is_not_utf8_is_refused_and_changes_nothing(lm):
    good = [{"role": "user", "content": "caf\u00e9 au lait"}]
    before = lm.create_chat_completion(good, max_tokens=4, temperature=0)
    bad = [{"role": "user", "content": "caf\udce9 au lait"}]
    with pytest.raises(mambacpp.Error, match="not valid UTF-8"):
        lm.create_chat_completion(bad, max_tokens=4, temperature=0)
    with pytest.raises(mambacpp.Error, match="not valid UTF-8"):
        lm.create_chat_completion(bad, max_tokens=4, temperature=0, stream=True)
    with pytest.raises(mambacpp.Error, match="not valid UTF-8"):
        lm.create_completion("caf\udce9", max_tokens=2)
    after = lm.create_chat_completion(good, max_tokens=4, temperature=0)
    assert after["choices"][0]["message"] == before["choices"][0]["message"]
