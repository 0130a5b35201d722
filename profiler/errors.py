"""The one exception type for errors a user can cause (bad flag, bad file, missing coefficient).

CLIs catch it, print its one-line message and exit 2; anything else is a bug and may show a traceback.
"""


class UserError(Exception):
    """A problem with the user's input, carrying a one-line message that names the file, field or flag."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))
