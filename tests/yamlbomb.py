"""The YAML of issue 16's memory bomb, for the unit and web tiers: not in a test module,
which the tiers would import twice under different names."""

NAMES = "abcdefghijklmnopqrstuvwxyz"


def bomb(levels):
    """The classic billion laughs: each level is a list of nine of the one before (9^levels
    strings in all) and the policy's version names the last, so an error quotes it."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        this, before = NAMES[level], NAMES[level - 1]
        lines.append(f"{this}: &{this} [{', '.join([f'*{before}'] * 9)}]")
    lines.append(f"version: *{NAMES[levels - 1]}")
    return "\n".join(lines) + "\n"
