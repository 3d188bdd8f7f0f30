"""Reading a finished run's stages in tests."""


def twice_as_long(stages: list[dict], load: str) -> list[bool]:
    """For each stage of a search, whether it may last twice the stage's max, not decided on fewer seconds than a
    stage has: the rerun of an undecided stage (the same load just before it), or the confirmation of a load that
    passed before."""
    return [(i > 0 and stages[i - 1]["verdict"]["outcome"] == "Undecided" and stages[i - 1][load] == s[load])
            or any(e[load] == s[load] and e["verdict"]["outcome"] == "Pass" for e in stages[:i])
            for i, s in enumerate(stages)]
