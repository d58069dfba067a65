"""ModuleList, ModuleDict, and discovery of every Param a module holds (or a clear refusal)."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_accum import nn


def test_module_list_names_indexing_and_mutation() -> None:
    layers = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    layers.append(nn.Linear(2, 1))
    assert len(layers) == 3 and isinstance(layers[1], nn.ReLU) and isinstance(layers[-1], nn.Linear)
    assert [n for n, _ in layers.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    head = layers[1:]
    assert isinstance(head, nn.ModuleList) and len(head) == 2
    layers.insert(0, nn.LayerNorm(2))
    assert [n for n, _ in layers.named_parameters()][:2] == ["0.weight", "0.bias"]
    del layers[0]
    layers[1] = nn.Tanh()
    assert isinstance(layers[1], nn.Tanh) and [type(m).__name__ for m in layers] == ["Linear", "Tanh", "Linear"]
    with pytest.raises(TypeError, match="ModuleList: item 3 is a int, not a Module"):
        layers.append(3)
    assert isinstance(nn.Sequential(nn.ReLU(), nn.Tanh())[:1], nn.Sequential)


def test_module_dict_keys_read_as_items_and_attributes() -> None:
    class GPTLike(nn.Module):
        def __init__(self) -> None:
            self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(5, 2), h=nn.ModuleList([nn.Linear(2, 2)])))
            self.transformer.ln_f = nn.LayerNorm(2)  # attribute assignment adds a key, as in PyTorch

    model = GPTLike()
    assert model.transformer.wte is model.transformer["wte"] and "ln_f" in model.transformer
    assert [n for n, _ in model.named_parameters()] == [
        "transformer.wte.weight", "transformer.h.0.weight", "transformer.h.0.bias",
        "transformer.ln_f.weight", "transformer.ln_f.bias",
    ]
    assert list(model.transformer) == ["wte", "h", "ln_f"] and len(model.transformer) == 3
    assert [k for k, _ in model.transformer.items()] == list(model.transformer.keys())
    with pytest.raises(AttributeError, match="ModuleDict has no attribute or key 'wpe'"):
        _ = model.transformer.wpe
    with pytest.raises(TypeError, match="ModuleDict: keys must be strings"):
        model.transformer[3] = nn.ReLU()
    model.eval()
    assert not model.transformer.h[0].training


def test_params_in_dicts_lists_and_tuples_are_found() -> None:
    class Holder(nn.Module):
        def __init__(self) -> None:
            self.heads = {"a": nn.Linear(2, 2), "b": [nn.Linear(2, 1), nn.Param(np.ones(3, dtype=np.float32))]}
            self.scales = (nn.Param(np.ones(1, dtype=np.float32)),)
            self.config = {"sizes": [2, 2], 3: "not a module"}  # plain data is left alone

    names = [n for n, _ in Holder().named_parameters()]
    assert names == ["heads.a.weight", "heads.a.bias", "heads.b.0.weight", "heads.b.0.bias", "heads.b.1",
                     "scales.0"]
    assert Holder().num_params() == 6 + 3 + 3 + 1


def test_sets_and_non_string_keys_holding_params_are_refused() -> None:
    class InASet(nn.Module):
        def __init__(self) -> None:
            self.blocks = {nn.Linear(2, 2)}

    class IntKeys(nn.Module):
        def __init__(self) -> None:
            self.heads = {0: nn.Linear(2, 2)}

    with pytest.raises(TypeError, match=r"InASet.blocks: a set holds a parameter or module; .* use a list or "
                                        r"nn.ModuleList"):
        InASet().parameters()
    with pytest.raises(TypeError, match=r"IntKeys.heads: dict key 0 \(int\) holds a parameter or module; keys must "
                                        r"be strings"):
        IntKeys().parameters()


def test_shared_and_cyclic_modules_are_visited_once() -> None:
    class Parent(nn.Module):
        def __init__(self) -> None:
            self.child = nn.Linear(2, 2)
            self.again = [self.child]
            self.child.parent = self  # a back reference must not loop

    model = Parent()
    assert [n for n, _ in model.named_parameters()] == ["child.weight", "child.bias"]
    assert [n for n, _ in model.named_modules()] == ["", "child"]
