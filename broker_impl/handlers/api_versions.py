"""ApiVersions (18): the versions and features this broker really implements."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from . import HANDLERS, handles
from ..features import SUPPORTED_FEATURES, finalized_features
from ..protocol.errors import Errors

if TYPE_CHECKING:
    from ..server.broker import Broker


def advertised_versions(response_cls) -> list:
    return [response_cls.ApiVersion(api_key=k, min_version=h.advertised_min, max_version=h.max_version)
            for k, h in sorted(HANDLERS.items())]


#: Kafka's ApiVersionsRequest.isValid: client software name and version (v3+).
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@handles("ApiVersions")
async def handle_api_versions(broker: Broker, ctx, req):
    R = ctx.api.Response
    if ctx.version >= 3 and not (_SOFTWARE.fullmatch(req.client_software_name or "")
                                 and _SOFTWARE.fullmatch(req.client_software_version or "")):
        return R(error_code=Errors.INVALID_REQUEST, api_keys=[], finalized_features_epoch=-1)
    resp = R(error_code=Errors.NONE, api_keys=advertised_versions(R))
    if ctx.version >= 3:
        # Before v4 Kafka leaves out the features whose lowest version is 0, which older clients
        # could not read (measured on 4.3.1: v3 lists metadata.version only).
        resp.supported_features = [R.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                                   for n, (lo, hi) in sorted(SUPPORTED_FEATURES.items())
                                   if lo > 0 or ctx.version >= 4]
        fin = finalized_features(broker.config)
        resp.finalized_features_epoch = 1 if fin else -1
        resp.finalized_features = [R.FinalizedFeatureKey(name=n, max_version_level=lvl, min_version_level=lvl)
                                   for n, lvl in sorted(fin.items())]
    return resp
