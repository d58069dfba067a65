"""``maccum bugs list | show NAME``: the bug museum (``minitorch_accum.testing.bugs``).

``list`` names every exhibit with the property that catches it and its source; ``show NAME``
runs the exhibit (its faulty recipe and the correct one, on its small model) and prints what
the recipe does, the measured gap and tolerance, the property and the citations; ``--code``
then prints the faulty code (each hook the recipe overrides, or the faulty ``loss_fn``) under
the correct code it replaces.
"""

from __future__ import annotations

__all__ = ["bugs_command"]


def bugs_command(action: str, name: str | None, code: bool = False) -> int:
    """Print the museum's list, or one exhibit measured; 0 when every exhibit shown is caught."""
    from minitorch_accum.testing import bugs

    if action == "list":
        width = max(len(n) for n in bugs.EXHIBITS)
        print(f"{'exhibit':<{width}}  caught by                            source")
        for item in bugs.EXHIBITS.values():
            sources = "; ".join(str(c) for c in item.citations)
            print(f"{item.name:<{width}}  {item.property:<36} {sources}")
            print(f"{'':<{width}}  {item.title}")
        print(f"\n{len(bugs.EXHIBITS)} exhibits; maccum bugs show NAME measures one on a small model")
        return 0
    if not name:
        raise ValueError(f"bugs show needs an exhibit's name: {', '.join(bugs.EXHIBITS)}")
    if name not in bugs.EXHIBITS:
        raise ValueError(f"no exhibit {name!r}; the museum holds {', '.join(bugs.EXHIBITS)}")
    measured = bugs.measure(bugs.exhibit(name))
    print(bugs.describe(measured))
    if code:
        print()
        print(bugs.show_code(measured.exhibit))
    return 0 if measured.caught else 1
