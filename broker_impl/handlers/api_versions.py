"""ApiVersions (18): the versions and features this broker really implements."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import HANDLERS, handles
from ..features import SUPPORTED_FEATURES, finalized_features
from ..protocol.errors import Errors

if TYPE_CHECKING:
    from ..server.broker import Broker


def advertised_versions(response_cls) -> list:
    return [response_cls.ApiVersion(api_key=k, min_version=h.advertised_min, max_version=h.max_version)
            for k, h in sorted(HANDLERS.items())]


@handles("ApiVersions")
async def handle_api_versions(broker: Broker, ctx, req):
    R = ctx.api.Response
    resp = R(error_code=Errors.NONE, api_keys=advertised_versions(R))
    if ctx.version >= 3:
        resp.supported_features = [R.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                                   for n, (lo, hi) in sorted(SUPPORTED_FEATURES.items())]
        fin = finalized_features(broker.config)
        resp.finalized_features_epoch = 1 if fin else -1
        resp.finalized_features = [R.FinalizedFeatureKey(name=n, max_version_level=lvl, min_version_level=lvl)
                                   for n, lvl in sorted(fin.items())]
    return resp
