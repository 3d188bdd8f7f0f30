"""Reading a finished run's stages in tests."""


def reruns(stages: list[dict], load: str) -> list[bool]:
    """For each stage, whether it reruns the stage before it: the same load after an undecided verdict (a rerun
    may last twice the stage's max)."""
    return [i > 0 and stages[i - 1]["verdict"]["outcome"] == "Undecided" and stages[i - 1][load] == s[load]
            for i, s in enumerate(stages)]
