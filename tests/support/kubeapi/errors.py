"""An error of the fake API server, answered as a Kubernetes Status object."""

from __future__ import annotations

from .resources import Obj


class ApiError(Exception):
    """An error answered as a Kubernetes Status object."""

    def __init__(self, code: int, reason: str, message: str,
                 causes: list[Obj] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.causes = causes

    def status(self) -> Obj:
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": self.message, "reason": self.reason, "code": self.code}
        if self.causes:
            status["details"] = {"causes": self.causes}
        return status

