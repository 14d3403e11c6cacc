"""When a lease is renewed while the lease container throttles (``_keeping.pressed_interval``):
at the last safe moment, from the time the renewals take -- azure-cosmos's 429 retries
included -- and the clocks' skew; never sooner than the renew interval."""

from __future__ import annotations

import pytest

from cosmos_changefeed._keeping import (
    CLOCK_SKEW,
    PRESSED_RETRY,
    pressed_interval,
    until_renewal,
)
from cosmos_changefeed._leases import Lease

RENEW, EXPIRY = 17.0, 60.0  # .NET's defaults, the processor's


@pytest.mark.parametrize(
    ("renewal_time", "renewed_after"),
    [
        (None, 40.0),  # not known yet: two thirds of the expiration interval
        (0.7, EXPIRY - (2 * 0.7 + PRESSED_RETRY + CLOCK_SKEW)),  # 57.1 s
        (5.0, EXPIRY - (2 * 5.0 + PRESSED_RETRY + CLOCK_SKEW)),  # 48.5 s
        (12.0, EXPIRY - (2 * 12.0 + PRESSED_RETRY + CLOCK_SKEW)),  # 34.5 s: sooner than 40 s
        (30.0, RENEW),  # azure-cosmos's whole 30 s: never sooner than the renew interval
    ],
)
def test_a_lease_is_renewed_late_enough_for_two_renewals_as_slow_as_the_slowest(
    renewal_time: float | None, renewed_after: float
) -> None:
    """Renewed at the interval given, a renewal as slow as the slowest seen that fails, the
    wait before the next and one more as slow end a second (the clocks' skew) before the
    lease expires -- or sooner, where the renew interval comes first."""
    interval = pressed_interval(RENEW, EXPIRY, renewal_time)
    assert interval == pytest.approx(renewed_after)
    if renewal_time is not None and interval > RENEW:
        ends = interval + renewal_time + PRESSED_RETRY + renewal_time
        assert ends == pytest.approx(EXPIRY - CLOCK_SKEW)


def test_a_failed_renewal_is_tried_again_at_once_while_the_container_throttles() -> None:
    """A renewal that failed is tried again after a quarter of the renew interval (at most
    5 s), and after half a second while the lease container throttles: a renewal at the last
    safe moment has time for two attempts, not for a wait between them."""
    lease = Lease.from_document(
        {"id": "p..0", "LeaseToken": "0", "Owner": "a", "timestamp": "2026-01-01T00:00:00Z"}
    )
    now = lease.last_updated
    assert until_renewal(lease, now, RENEW, failures=1) == pytest.approx(4.25)
    assert until_renewal(lease, now, RENEW, failures=1, pressed=True) == PRESSED_RETRY
    assert until_renewal(lease, now, RENEW) == pytest.approx(RENEW)
