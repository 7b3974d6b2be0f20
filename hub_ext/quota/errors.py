"""The one error type bad input raises: a single line that names the culprit."""


class ValidationError(ValueError):
    """Input that cannot be accepted.

    ``str(err)`` is one line, meant for a person: it names the object, node,
    namespace or value at fault and says what is wrong with it. Callers show it
    as is (CLI: on stderr with a non-zero exit; API: in a 4xx body).
    """

    def __init__(self, message: str):
        # Keep it one line whatever the input contained (YAML errors are multi-line).
        super().__init__(" ".join(str(message).split()))

    def within(self, where: str) -> "ValidationError":
        """The same error, prefixed with the place it came from (a file, a step)."""
        return ValidationError(f"{where}: {self}")
