#!/usr/bin/env python3
"""A TCP relay that delays every chunk by a fixed time in each direction: the lab's stand-in for
netem (not available in this kernel). Put it in front of a server and advertise the relay's
port, and that server is "farther": a round trip through it takes 2 x DELAY longer.

  delay_relay.py LISTEN_PORT TARGET_HOST TARGET_PORT [--delay-ms 10]

Prints {"event":"listening","port":P} when ready. Runs until killed.
"""
import argparse
import asyncio
import json


async def pump(reader, writer, delay):
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            await asyncio.sleep(delay)
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("port", type=int)
    parser.add_argument("target_host")
    parser.add_argument("target_port", type=int)
    parser.add_argument("--delay-ms", type=float, default=10.0)
    args = parser.parse_args()
    delay = args.delay_ms / 1000.0

    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection(args.target_host, args.target_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pump(client_reader, server_writer, delay), pump(server_reader, client_writer, delay))

    server = await asyncio.start_server(handle, host=None, port=args.port)
    print(json.dumps({"event": "listening", "port": args.port}), flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
