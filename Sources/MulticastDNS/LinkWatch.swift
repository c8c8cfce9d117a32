import Logging
import NetworkPlatform
import NearbyBasics

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The kernel's reports that links or addresses came, went or changed, as wake-ups (Linux:
/// netlink, as avahi-daemon and mDNSResponder listen to it), so that a renumbered or re-linked
/// interface is noticed at once instead of at the next look on the two-second timer.
///
/// A thread of its own waits in `poll` on the netlink socket and a wake pipe. Reports coalesce:
/// ``changes`` holds at most one pending wake-up (the interfaces are looked at afresh each time,
/// so a burst of reports needs one look, not one each).
final class LinkWatch: Sendable {
    /// One element per burst of reports; finishes when the watch stops or fails.
    let changes: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation
    private let socket: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// Whether ``stop()`` has written to the wake pipe (its ends stay open until the thread ends).
    private let stopping = Locked(false)
    private let logger: Logger

    private init(socket: Int32, wake: (read: Int32, write: Int32), logger: Logger) {
        (changes, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.socket = socket
        self.wakeRead = wake.read
        self.wakeWrite = wake.write
        self.logger = logger
    }

    /// Starts watching; nil (logged) where the kernel gives no such reports.
    static func start(logger: Logger) -> LinkWatch? {
        guard let socket = NetworkPlatform.openLinkChangeSocket() else {
            logger.debug("no link and address reports from the kernel: interfaces are looked at every 2 s")
            return nil
        }
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            closeDescriptor(socket)
            logger.debug("no link and address reports: \(SocketError("pipe"))")
            return nil
        }
        let watch = LinkWatch(socket: socket, wake: (ends[0], ends[1]), logger: logger)
        do {
            try startThread(name: "nearby-links") { watch.loop() }
        } catch {
            for descriptor in [socket, ends[0], ends[1]] { closeDescriptor(descriptor) }
            logger.debug("no link and address reports: \(error)")
            return nil
        }
        return watch
    }

    /// Ends the watch: the thread closes its descriptors and ``changes`` finishes.
    func stop() {
        // Under the lock: the thread closes the pipe under it too, so the write never reaches
        // a descriptor closed (or reused) meanwhile.
        stopping.withLockedValue { stopping in
            guard !stopping else { return }
            stopping = true
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
        }
    }

    private func loop() {
        var descriptors = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        while true {
            for index in descriptors.indices { descriptors[index].revents = 0 }
            let ready = poll(&descriptors, nfds_t(descriptors.count), -1)
            if ready < 0 {
                if errno == EINTR { continue }
                logger.warning("link and address reports stopped (poll: \(String(cString: strerror(errno)))): interfaces are looked at every 2 s")
                break
            }
            if descriptors[1].revents != 0 { break }
            guard descriptors[0].revents != 0 else { continue }
            let (any, failed) = NetworkPlatform.drainLinkChanges(socket)
            if any { continuation.yield(()) }
            if failed {
                logger.warning("link and address reports stopped (the netlink socket failed): interfaces are looked at every 2 s")
                break
            }
        }
        continuation.finish()
        closeDescriptor(socket)
        // The wake pipe's ends close once nothing can write to them any more.
        stopping.withLockedValue { stopping in
            stopping = true
            closeDescriptor(wakeRead)
            closeDescriptor(wakeWrite)
        }
    }
}
