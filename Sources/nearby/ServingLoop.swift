import ConnectionBroker
import Logging
import PeerConnection

/// The serving loop every serving command shares (serve, serve --auto-invite, invite): each
/// event is handled once stdout has room (while nobody reads stdout, the events wait in their
/// bounded stream, not in the output queue), and each connection to serve runs in a child of a
/// discarding group (a finished connection's task is freed at once; a plain group keeps every
/// child until it is awaited, and memory grew per connection). Between events, unused memory
/// is given back (``QuietRelease``).
func serveAll<Events: AsyncSequence & Sendable>(
    events: Events, logger: Logger, handle: @Sendable (Events.Element) -> PeerConnection?,
    serve: @escaping @Sendable (PeerConnection) async -> Void
) async where Events.Element: Sendable {
    let idle = QuietRelease(logger: logger)
    idle.activity()
    await withDiscardingTaskGroup { group in
        group.addTask { await idle.run() }
        defer { group.cancelAll() }
        do {
            for try await event in events {
                await StandardOutput.events.room()
                idle.activity()
                if let connection = handle(event) { group.addTask { await serve(connection) } }
            }
        } catch {
            logger.debug("the events ended: \(error)")
        }
    }
}

/// Prints a listener's event; the connection to serve, when it brought one.
/// `advice`: what a refusal of a peer that is not pinned tells a person to do.
func printListenerEvent(_ json: Bool, _ event: PeerListener.Event, advice: TrustAdviceSide) -> PeerConnection? {
    switch event {
    case .rejected(let rejection):
        printRejection(json, address: rejection.address, peerID: rejection.peerID, error: rejection.error, advice: advice)
    case .connected(let connection):
        printConnected(json, connection)
        return connection
    case .paired(let result):
        printPinned(json, result)
    case .invitation(let attempt):
        printInvitationAttempt(json, attempt)
    case .strangers(let summary):
        printStrangers(json, summary)
    }
    return nil
}

/// Prints a broker's event; the connection to serve, when it brought one.
func printBrokerEvent(_ json: Bool, _ event: BrokerEvent, advice: TrustAdviceSide) -> PeerConnection? {
    switch event {
    case .connected(let connection, let initiator):
        printConnected(json, connection, extra: [("initiator", .string(initiator.description))])
        return connection
    case .disconnected:
        break  // each connection's own task says so
    case .rejected(let rejection):
        printRejection(json, address: rejection.address, peerID: rejection.peerID, error: rejection.error, advice: advice)
    case .skipped(let name, let reason):
        printEvent(json, [("event", .string("skipped")), ("name", .string(name)), ("reason", .string(reason))], text: "Skipped \"\(name)\": \(reason)")
    case .dialFailed(let peer, let reason):
        printEvent(
            json, [("event", .string("dialFailed")), ("peerID", .string(peer.description)), ("reason", .string(reason))],
            text: "Could not connect to \(peer.short): \(reason) (retrying)")
    case .invitation(let attempt):
        printInvitationAttempt(json, attempt)
    case .strangers(let summary):
        printStrangers(json, summary)
    }
    return nil
}
