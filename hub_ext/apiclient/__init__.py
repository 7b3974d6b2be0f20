"""The one Python client of the scheduler service's REST API and event stream.

Every Python caller goes through it: the command line and the notebook
(``TenancyClient``, standard library only, so any kernel has it), the Lab server
extension and the hub's spawner (``AsyncTenancyClient``, on tornado's loop). Both are
the same ``Calls``: what each call of the API sends and reads back is written once in
``calls``; the two clients differ only in how a request travels. A refusal or an outage
is one family of exceptions (``errors``), carrying the service's own sentence.
"""

from .calls import FINAL, Calls
from .errors import NotConfigured, ServiceDown, ServiceRefused, TenancyError
from .sync import TenancyClient

__all__ = ["FINAL", "Calls", "NotConfigured", "ServiceDown", "ServiceRefused", "TenancyClient", "TenancyError"]
