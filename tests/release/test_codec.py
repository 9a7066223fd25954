"""dpkit.release.codec: what crosses is data — tensors, arrays, numbers, strings — never objects."""

import math
import pickle

import numpy as np
import pytest
import torch

from dpkit.base.errors import ServerError
from dpkit.release.codec import CodecError, decode, encode, raise_if_error


def test_a_payload_tree_round_trips_into_fresh_storage():
    x = torch.randn(3, 4)
    payload = {"t": x, "view": x[:, 1], "a": np.arange(5), "n": 3, "f": math.inf, "s": "ok",
               "nested": [(1, 2.5), {"b": torch.tensor([True, False])}], "none": None}
    back = decode(encode(payload))
    assert torch.equal(back["t"], x) and back["t"].data_ptr() != x.data_ptr()
    assert torch.equal(back["view"], x[:, 1]) and back["view"].is_contiguous()
    assert back["a"].tolist() == list(range(5)) and back["f"] == math.inf
    assert back["nested"][0] == (1, 2.5) and back["nested"][1]["b"].dtype == torch.bool
    x.mul_(0)
    assert back["t"].abs().sum() > 0


@pytest.mark.parametrize("value", [lambda: 0, object(), {1: "int key"}, np.array([object()]),
                                   torch.nn.Linear(2, 2), pickle])
def test_objects_are_refused_when_encoded(value):
    with pytest.raises(CodecError):
        encode({"x": value})


def test_decoding_runs_no_code():
    class Boom:
        def __reduce__(self):
            return (print, ("pwned",))

    data = pickle.dumps(Boom())
    with pytest.raises(CodecError, match="not a dpkit message"):
        decode(data)


def test_a_server_failure_comes_back_as_an_error_with_its_traceback():
    answer = decode(encode({"__error__": "KeyError", "message": "'x'", "traceback": "Trace..."}))
    with pytest.raises(ServerError, match="KeyError") as info:
        raise_if_error(answer)
    assert info.value.remote_traceback == "Trace..."
    import pickle  # as a Ray cell's failure reaches the driver

    back = pickle.loads(pickle.dumps(info.value))
    assert (type(back), str(back), back.kind, back.message, back.remote_traceback) == (
        ServerError, str(info.value), "KeyError", "'x'", "Trace...")
