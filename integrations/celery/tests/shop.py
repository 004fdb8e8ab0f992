"""A small Celery app for the tests: a shop whose courier API is down.

Its broker is SHOP_BROKER (a Redis the test started); the courier is back
once the file SHOP_FIXED names exists. Redrive is set up with one line.
"""

import os

from celery import Celery

import redrive_celery

app = Celery("shop", broker=os.environ.get("SHOP_BROKER", "redis://127.0.0.1:6379/0"))
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    task_acks_late=True,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
if os.environ.get("REDRIVE_URL"):
    redrive_celery.setup(app, backoff_cap=float(os.environ.get("REDRIVE_BACKOFF_CAP", "60")))


class CourierDown(Exception):
    """The courier's API refused the booking."""


def fixed():
    path = os.environ.get("SHOP_FIXED", "")
    return bool(path) and os.path.exists(path)


@app.task(bind=True, name="shop.ship", autoretry_for=(CourierDown,), max_retries=2, default_retry_delay=0.2)
def ship(self, order):
    """Books a courier; retried twice, then a letter, until the fix."""
    if not fixed():
        raise CourierDown("courier API answered 401 Unauthorized for order %s: token expired" % order)
    shipped = os.environ.get("SHOP_SHIPPED", "")
    if shipped:
        # One line per run: the tests count how often each order shipped.
        with open(shipped, "a") as f:
            f.write(order + "\n")
    return "shipped " + order


@app.task(name="shop.charge")
def charge(order, amount):
    """Charges a card; a decline is not retried."""
    raise ValueError("card declined for order %s (%d cents): insufficient funds" % (order, amount))


@app.task(bind=True, name="shop.notify", max_retries=3)
def notify(self, order, done_file):
    """Fails once, then succeeds: never a letter."""
    if self.request.retries == 0:
        raise self.retry(exc=ConnectionError("mail relay reset the connection"), countdown=0.1)
    with open(done_file, "w") as f:
        f.write(order)
