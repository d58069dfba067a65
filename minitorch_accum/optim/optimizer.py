"""The optimizer protocol, after Burn: ``model = opt.step(model, grads)``, with PyTorch's parameter groups.

Parameters are updated in place (the same Param objects, so anything holding them
stays valid) and the model is returned for Burn's reading order. State is kept per
parameter *name*, so a checkpoint can be restored into a freshly built model.

Which parameters, with which hyperparameters:

* ``SGD(0.1, momentum=0.9)`` / ``AdamW(lr=1e-3)`` (no params, today's form): every
  parameter of the model given to ``step()`` that has a gradient, with these
  hyperparameters. ``opt.param_groups`` is then one group whose ``"params"`` is None.
* ``SGD(model.parameters(), lr=0.1)``: those parameters only.
* ``AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
  lr=3e-4)``: parameter groups as PyTorch's; a group's own hyperparameters override the
  defaults given after it. A model parameter that is in no group is not updated, and
  gets no state, even when it has a gradient (as in PyTorch, where such a parameter is
  not in the optimizer at all): leaving parameters out is how they are frozen.

``step(model, grads, lr=x)`` (the Learner passes its scheduler's rate) scales every
group's rate by ``x / opt.lr``, as a PyTorch scheduler scales each group's initial rate;
without groups that is simply ``x``. ``opt.lr`` (and every other hyperparameter read as
an attribute) is the default given to the constructor; assigning ``opt.lr = v`` sets
the default and every group's rate.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import numpy as np

from minitorch_accum.autodiff import Gradients
from minitorch_accum.backend import backend_of_array
from minitorch_accum.kernels.arrays import Array
from minitorch_accum.nn import Module, Param
from minitorch_accum.optim.fused_groups import FusedGroup
from minitorch_accum.optim.grad_source import GradientWindow, StepRecorder, WindowSource, gradient_window
from minitorch_accum.optim.hyperparameter_checks import check_rate

__all__ = ["Optimizer", "ParamGroup", "Params", "UpdateEntry"]

# (name, param, gradient array)
UpdateEntry = tuple[str, Param, Array]
#: a parameter group: "params", and hyperparameters of the optimizer, each of its own type
ParamGroup = dict[str, Any]
#: what a constructor takes as ``params``: the Params to update, or parameter groups
Params = Iterable[Param] | Iterable[ParamGroup]


class Optimizer(ABC):
    """Base class: sorts (name, param, grad) into parameter groups and hands each group,
    with its hyperparameters, to ``_update``."""

    #: the hyperparameters of this optimizer, "lr" first; a group may set any of them
    hyperparameter_names: tuple[str, ...] = ("lr",)
    #: the recorder of the window being stepped, while ``step`` runs (None: nothing listens)
    _recorder: StepRecorder | None = None

    def __init__(self, params: object, defaults: dict[str, Any]) -> None:
        # params: Params, parameter groups or None, as the user gave them (anything else is refused here)
        object.__setattr__(self, "defaults", self._validated(defaults))
        self.param_groups: list[ParamGroup] = []
        self.state: dict[str, dict[str, Any]] = {}
        self.step_count = 0
        self.skipped_steps = 0
        if params is None:
            self.param_groups.append({"params": None, **self.defaults})
            return
        if isinstance(params, Param | Module) or not isinstance(params, Iterable):
            hint = "pass model.parameters()" if isinstance(params, Module) else "wrap it in a list"
            raise TypeError(f"{self._name}: params must be an iterable of Params or of parameter-group dicts, "
                            f"got a {type(params).__name__}; {hint}")
        items = list(params)
        if not items:
            raise ValueError(f"{self._name}: got an empty parameter list")
        if all(isinstance(item, dict) for item in items):
            for group in items:
                self.add_param_group(group)
        else:
            self.add_param_group({"params": items})

    @property
    def _name(self) -> str:
        return type(self).__name__

    # ------------------------------------------------------ hyperparameters
    def _validated(self, hyperparameters: dict[str, Any]) -> dict[str, Any]:
        """The hyperparameters checked (and normalized); subclasses check theirs."""
        return {"lr": check_rate("lr", hyperparameters["lr"])}

    def add_param_group(self, group: ParamGroup) -> None:
        """Add a group ``{"params": [...], <hyperparameter>: value, ...}``; what it does not set
        comes from the defaults. A Param may belong to one group only."""
        if "params" not in group:
            raise ValueError(f"{self._name}: a parameter group needs a 'params' entry, got keys {sorted(group)}")
        unknown = sorted(set(group) - {"params"} - set(self.hyperparameter_names))
        if unknown:
            raise ValueError(f"{self._name}: unknown hyperparameter(s) {', '.join(unknown)} in a parameter group; "
                             f"known: {', '.join(self.hyperparameter_names)}")
        params = group["params"]
        params = [params] if isinstance(params, Param) else list(params)
        taken = {id(p) for g in self.param_groups for p in (g["params"] or ())}
        if self.param_groups and self.param_groups[0]["params"] is None:
            raise ValueError(f"{self._name}: was made without params (it updates every parameter of the model); "
                             "it takes no parameter groups")
        for i, p in enumerate(params):
            if not isinstance(p, Param):
                raise TypeError(f"{self._name}: item {i} of a parameter group is a {type(p).__name__}, not a Param")
            if id(p) in taken:
                raise ValueError(f"{self._name}: a Param of shape {p.shape} appears in more than one parameter group")
            taken.add(id(p))
        settings = {k: v for k, v in group.items() if k != "params"}
        self.param_groups.append({"params": params, **self._validated({**self.defaults, **settings})})

    def __getattr__(self, name: str) -> Any:
        # only reached when normal lookup fails: the defaults read as attributes (opt.lr, opt.betas)
        defaults = self.__dict__.get("defaults")
        if defaults is not None and name in defaults:
            return defaults[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.hyperparameter_names:
            # a hyperparameter assigned on the optimizer is the default and every group's
            defaults = self._validated({**self.defaults, name: value})
            groups = [{**g, **self._validated({**g, name: value})} for g in self.param_groups]
            object.__setattr__(self, "defaults", defaults)
            self.param_groups = groups
        else:
            object.__setattr__(self, name, value)

    def hyperparameters(self) -> dict[str, Any]:
        """The defaults, and the groups (their hyperparameters, and the positions of their
        parameters in the order the groups list them, as PyTorch's state_dict numbers them)."""
        groups, start = [], 0
        for group in self.param_groups:
            settings = {k: _plain(group[k]) for k in self.hyperparameter_names}
            if group["params"] is None:
                groups.append({"params": None, **settings})
            else:
                count = len(group["params"])
                groups.append({"params": list(range(start, start + count)), **settings})
                start += count
        return {**{k: _plain(v) for k, v in self.defaults.items()}, "param_groups": groups}

    # ---------------------------------------------------------------- step
    def step(self, model: Module, grads: Gradients | WindowSource, lr: float | None = None) -> Module:
        """One update of the parameters of ``model`` that have a gradient in ``grads`` and
        belong to a group (all of them when the optimizer was made without params).

        ``grads`` is a Gradients container or an Accumulator. A window marked
        non-finite is skipped: no parameter or state changes, ``skipped_steps`` grows.
        ``lr`` scales every group's rate by ``lr / self.lr`` (see the module docstring).
        Gradients none of which is of a parameter of ``model`` (another model's) are a
        ValueError naming the model; no step is counted.
        """
        window = gradient_window(grads)
        if window.arrays and not any(window.get(p) is not None for _, p in model.named_parameters()):
            raise ValueError(
                f"{self._name}.step: none of the {len(window.arrays)} gradients of the {type(grads).__name__} "
                f"belongs to a parameter of the {type(model).__name__} given ({len(model.parameters())} "
                "parameters): they were computed for another model; pass that model")
        if window.skip:
            self.skipped_steps += 1
            return model
        self._recorder = window.recorder
        try:
            self.update(self._entries(model, window), window.grad_scale, lr)
        finally:
            self._recorder = None
        return model

    def update(self, grouped: list[list[UpdateEntry]], grad_scale: float = 1.0, lr: float | None = None) -> None:
        """One step of the given (name, param, gradient) entries, sorted by group (one list per
        entry of ``param_groups``). ``step()`` calls it for a model's parameters; ZeRO-1 calls it
        for the pieces of parameters in its rank's shard, named ``<name>@<start>:<stop>``."""
        if len(grouped) != len(self.param_groups):
            raise ValueError(f"{self._name}.update: got {len(grouped)} lists of entries for "
                             f"{len(self.param_groups)} parameter groups")
        base = self.defaults["lr"]
        target = base if lr is None else check_rate("lr", lr)
        if base == 0 and target != 0 and any(g["lr"] != 0 for g in self.param_groups):
            # a group's rate is scaled by lr / opt.lr: with opt.lr 0 there is no ratio to scale by
            raise ValueError(f"{self._name}.step: lr={target!r} cannot scale the parameter groups' own rates when "
                             "the optimizer's lr is 0 (each group's rate is multiplied by lr / opt.lr); give the "
                             "optimizer the rate its schedule multiplies")
        self.step_count += 1
        for group, entries in zip(self.param_groups, grouped, strict=True):
            if not entries:
                continue
            settings = self._validated({k: group[k] for k in self.hyperparameter_names})
            if target != base:
                settings["lr"] = target if settings["lr"] == base else settings["lr"] * (target / base)
            self._update(entries, settings, grad_scale)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Always an error that says what to do instead: there are no gradients to zero here."""
        raise TypeError(
            f"{self._name}.zero_grad(): there is nothing to zero: gradients are values here, not state of the "
            "parameters or the optimizer (Burn's design). Each loss.backward() returns a new Gradients "
            "container (step with it, then drop it); an Accumulator starts its next window with acc.zero() "
            "after model = opt.step(model, acc), and its first backward then overwrites rather than adds"
        )

    def group_index(self, param: Param) -> int | None:
        """Which parameter group updates ``param`` (None: none does, so it is not updated)."""
        if self.param_groups[0]["params"] is None:
            return 0
        return next((i for i, g in enumerate(self.param_groups) if any(p is param for p in g["params"])), None)

    def _entries(self, model: Module, window: GradientWindow) -> list[list[UpdateEntry]]:
        """(name, param, grad) of every model parameter with a gradient, sorted into the groups."""
        group_of = {id(p): i for i, g in enumerate(self.param_groups) for p in (g["params"] or ())}
        every = self.param_groups[0]["params"] is None
        grouped: list[list[UpdateEntry]] = [[] for _ in self.param_groups]
        for name, param in model.named_parameters():
            grad = window.get(param)
            index = 0 if every else group_of.get(id(param))
            if grad is None or index is None:
                continue
            if tuple(grad.shape) != param.shape:
                raise ValueError(
                    f"optimizer: gradient for {name} has shape {tuple(grad.shape)}, parameter has {param.shape}"
                )
            if backend_of_array(grad).device != param.device:
                raise ValueError(f"optimizer: gradient for {name} is on another device than the parameter")
            grouped[index].append((name, param, grad))
        return grouped

    def _launch(self, kernel: str, group: FusedGroup, grad_scale: float) -> contextlib.AbstractContextManager[None]:
        """The block is one launch of the fused ``kernel`` over ``group``, which multiplies its
        gradients by ``grad_scale``: timed by the window's recorder when one listens (a traced
        window: explain, ``maccum train --trace-out``), else nothing at all."""
        if self._recorder is None:
            return contextlib.nullcontext()
        return self._recorder.launch(kernel, list(zip(group.names, group.grads, strict=True)), scale=grad_scale)

    @abstractmethod
    def _update(self, entries: list[UpdateEntry], settings: dict[str, Any], grad_scale: float) -> None:
        """Apply the update rule with one group's ``settings`` to its entries, each gradient
        taken times ``grad_scale``."""

    def state_array_slots(self, settings: dict[str, Any]) -> tuple[str, ...] | None:
        """The arrays this optimizer keeps for each parameter it has stepped, under one group's
        ``settings`` (a float32 master copy of a 16-bit parameter comes on top, ``"master"``), so a
        checkpoint's state can be checked complete; None when a subclass does not say."""
        return None

    @abstractmethod
    def state_slots(self) -> int:
        """How many arrays of a parameter's size this optimizer keeps per parameter (momentum,
        moments), for planning memory before the first step allocates them."""

    # ------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """Counters, hyperparameters (with the groups' inside, see ``hyperparameters``), and
        per-parameter state arrays as host NumPy copies."""
        return {
            "step_count": self.step_count,
            "skipped_steps": self.skipped_steps,
            "hyperparameters": self.hyperparameters(),
            "state": {
                name: {key: (np.array(backend_of_array(v).to_host(v), copy=True) if hasattr(v, "shape") else v)
                       for key, v in slots.items()}
                for name, slots in self.state.items()
            },
        }

    def load_state_dict(self, state: dict[str, Any], model: Module | None = None) -> None:
        """Restore ``state_dict()`` output; with ``model``, arrays move to its parameters' devices
        and every name must belong to one of its parameters.

        Hyperparameters are checked as the constructor checks them, and an unknown one is an
        error. Saved groups restore each group's hyperparameters by position (the groups
        must have the same sizes; the Params stay this optimizer's); hyperparameters saved
        without groups apply to every group. Nothing changes unless everything fits.
        """
        missing = [key for key in ("step_count", "state") if key not in state]
        if missing:
            raise ValueError(f"{self._name}.load_state_dict: the state lacks {', '.join(missing)}")
        saved = dict(state.get("hyperparameters", {}))
        saved_groups = saved.pop("param_groups", None)
        self._check_known(saved, "")
        defaults = self._validated({**self.defaults, **saved})
        groups = self._restored_groups(saved_groups, saved)
        params = dict(model.named_parameters()) if model is not None else {}
        restored: dict[str, dict[str, Any]] = {}
        for name, slots in state["state"].items():
            if model is not None and name not in params:
                raise ValueError(f"optimizer state names parameter {name!r}, which the model does not have")
            backend = params[name]._backend if name in params else None
            # copies: the steps update their slots in place, and the caller's state (a checkpoint
            # read once, a dict kept to start another run from) must stay as it was
            restored[name] = {
                key: ((backend.asarray(v, copy=True) if backend is not None else np.array(v, copy=True))
                      if isinstance(v, np.ndarray) else v)
                for key, v in slots.items()
            }
        object.__setattr__(self, "defaults", defaults)
        self.param_groups = groups
        self.state = restored
        self.step_count = int(state["step_count"])
        self.skipped_steps = int(state.get("skipped_steps", 0))

    def _check_known(self, saved: dict[str, Any], where: str) -> None:
        unknown = sorted(set(saved) - set(self.hyperparameter_names))
        if unknown:
            raise ValueError(f"{self._name}.load_state_dict: unknown hyperparameter(s) {', '.join(unknown)}{where}; "
                             f"{self._name} has {', '.join(self.hyperparameter_names)}")

    def _restored_groups(self, saved_groups: list[dict[str, Any]] | None,
                         saved: dict[str, Any]) -> list[dict[str, Any]]:
        if saved_groups is None:
            return [{**g, **self._validated({**g, **saved})} for g in self.param_groups]
        sizes = [None if g["params"] is None else len(g["params"]) for g in self.param_groups]
        saved_sizes = [None if g.get("params") is None else len(g["params"]) for g in saved_groups]
        if sizes != saved_sizes:
            raise ValueError(f"{self._name}.load_state_dict: the state has parameter groups of sizes {saved_sizes} "
                             f"(None: every parameter), this optimizer {sizes}")
        groups = []
        for i, (group, saved_group) in enumerate(zip(self.param_groups, saved_groups, strict=True)):
            settings = {k: v for k, v in saved_group.items() if k != "params"}
            self._check_known(settings, f" in parameter group {i}")
            groups.append({"params": group["params"], **self._validated({**group, **settings})})
        return groups


def _plain(value: Any) -> Any:
    """A hyperparameter as JSON keeps it (tuples become lists)."""
    return list(value) if isinstance(value, tuple) else value
