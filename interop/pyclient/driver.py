"""A steerable py-eureka-client for Muster's interop tests.

The client is configured from the JSON in $DRIVER_CONFIG and started as an
application would start it (register, heartbeats with delta fetches on one
timer). Commands arrive on stdin, one a line; every answer is one JSON
object on stdout, so a test reads what the client did and saw:

  apps            {"event":"apps","apps":{APP:[{id,status,overriddenstatus,metadata,actionType}]},
                   "localHash":..,"deltaHash":..}
  status VALUE    the client's own status change (PUT .../status?value=)
  override-delete the client's own override removal (DELETE .../status)
  heartbeat       one heartbeat now, besides the timer's
  stop            stop as an application does (DOWN, then cancel) and exit

Errors the client reports through its on_error hook are printed as
{"event":"error",...}; they are what a failing scenario shows beside the wire.
"""
import asyncio
import faulthandler
import json
import logging
import os
import signal
import sys
import threading

import py_eureka_client
from py_eureka_client import eureka_client
from py_eureka_client import logger as py_logger


def emit(**kv):
    sys.stdout.write(json.dumps(kv, sort_keys=True) + "\n")
    sys.stdout.flush()


class JSONLines(logging.Handler):
    """The library's log records, one JSON line each (an exception as its
    last line, not a traceback)."""

    def emit(self, record):
        err = ""
        if record.exc_info and record.exc_info[1] is not None:
            err = repr(record.exc_info[1])[:300]
        emit(event="log", level=record.levelname, msg=record.getMessage()[:300], error=err)


def on_error(err_type, err):
    emit(event="error", type=err_type, error=str(err)[:300])


def view(client):
    apps = {}
    inner = client._EurekaClient__applications  # the client's own cache, as it is
    if inner is None:
        return apps, "", ""
    for app in inner.applications:
        apps[app.name] = [{
            "id": i.instanceId, "status": i.status, "overriddenstatus": i.overriddenstatus,
            "metadata": i.metadata, "actionType": i.actionType,
        } for i in app.instances]
    delta = client._EurekaClient__delta
    return apps, client._EurekaClient__get_applications_hash(), (delta.appsHashcode if delta else "")


def read_commands(loop, queue):
    # stdin is read on a daemon thread, so that a signal or the end of the
    # commands never waits for a blocked read.
    for line in sys.stdin:
        loop.call_soon_threadsafe(queue.put_nowait, line)
    loop.call_soon_threadsafe(queue.put_nowait, "stop")


async def main():
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    lib = logging.getLogger("py-eureka-client-driver")
    lib.setLevel(logging.INFO)
    lib.addHandler(JSONLines())
    py_logger.set_custom_logger(lib)
    cfg = json.loads(os.environ["DRIVER_CONFIG"])
    client = eureka_client.EurekaClient(
        eureka_server=",".join(cfg["serviceUrls"]),
        app_name=cfg["app"],
        instance_id=cfg["instanceId"],
        instance_host="127.0.0.1",
        instance_ip="127.0.0.1",
        instance_port=cfg["port"],
        renewal_interval_in_secs=cfg.get("heartbeatSecs", 1),
        duration_in_secs=cfg.get("durationSecs", 90),
        metadata=cfg.get("metadata", {}),
        should_discover=not cfg.get("noFetch", False),
        on_error=on_error,
    )
    await client.start()
    emit(event="started", version=py_eureka_client.version)
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()
    # SIGINT and SIGTERM stop the client as an application's shutdown does.
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, queue.put_nowait, "stop")
    threading.Thread(target=read_commands, args=(loop, queue), daemon=True).start()
    while True:
        line = await queue.get()
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "apps":
            apps, local, remote = view(client)
            emit(event="apps", apps=apps, localHash=local, deltaHash=remote)
        elif cmd == "status":
            await client.status_update(arg)
            emit(event="status", value=arg)
        elif cmd == "override-delete":
            await client.delete_status_override()
            emit(event="override-delete")
        elif cmd == "heartbeat":
            await client.send_heartbeat()
            emit(event="heartbeat")
        elif cmd == "stop":
            await client.stop()
            emit(event="stopped")
            # The heartbeat thread is a daemon the library cannot stop.
            sys.stdout.flush()
            os._exit(0)
        elif cmd:
            emit(event="error", type="driver", error="unknown command " + cmd)


if __name__ == "__main__":
    asyncio.run(main())
