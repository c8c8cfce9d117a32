import NIOConcurrencyHelpers
import PeerConnection
import PeerTrust

/// Dials (or measures) a peer's addresses as ``DialPlan`` orders them: each attempt starts
/// 30 ms after the one before unless one has already succeeded, and the first success wins.
/// A connection that succeeds after the winner is closed.
enum HappyEyeballs {
    private enum Attempt: Sendable {
        case connected(PeerConnection)
        case failed(PeerConnectionError)
        case skipped
    }

    static func connect(
        _ plan: [(address: String, after: Duration)], port: Int, expecting peer: PeerID, configuration: PeerConnectionConfiguration
    ) async -> Result<PeerConnection, PeerConnectionError> {
        guard !plan.isEmpty else { return .failure(PeerConnectionError(.unreachable, "the peer announced no address")) }
        let (winners, winner) = AsyncStream.makeStream(of: Result<PeerConnection, PeerConnectionError>.self)
        // The attempts run on after the winner is known (a late success is closed), so they
        // live in a task of their own; the caller only waits for the first outcome that counts.
        Task {
            let won = Flag()
            await withTaskGroup(of: Attempt.self) { group in
                for (address, after) in plan {
                    group.addTask {
                        if after > .zero { try? await Task.sleep(for: after) }
                        guard !won.isSet else { return .skipped }
                        do {
                            return .connected(try await PeerConnection.connect(host: address, port: port, expecting: peer, configuration: configuration))
                        } catch {
                            return .failed(error as? PeerConnectionError ?? PeerConnectionError(.unreachable, "\(error)"))
                        }
                    }
                }
                var errors: [PeerConnectionError] = []
                for await attempt in group {
                    switch attempt {
                    case .connected(let connection):
                        if won.set() {
                            winner.yield(.success(connection))
                        } else {
                            await connection.close(code: 1000, reason: "duplicate")
                        }
                    case .failed(let error):
                        errors.append(error)
                    case .skipped:
                        break
                    }
                }
                if !won.isSet {
                    // Every address failed: the most telling reason (trust over reachability).
                    let chosen = errors.first { $0.code == .untrusted } ?? errors.first { $0.code != .unreachable } ?? errors.first
                    winner.yield(.failure(chosen ?? PeerConnectionError(.unreachable, "no address answered")))
                }
                winner.finish()
            }
        }
        for await outcome in winners { return outcome }
        return .failure(PeerConnectionError(.unreachable, "no address answered"))
    }

    /// The round-trip time of the first address to answer a probe, and that address.
    static func measure(_ plan: [(address: String, after: Duration)], port: Int, timeout: Duration) async -> (Duration?, String?) {
        await withTaskGroup(of: (Duration?, String).self) { group in
            let won = Flag()
            for (address, after) in plan {
                group.addTask {
                    if after > .zero { try? await Task.sleep(for: after) }
                    guard !won.isSet else { return (nil, address) }
                    return (await PeerConnection.measureRoundTrip(host: address, port: port, timeout: timeout), address)
                }
            }
            for await (rtt, address) in group where rtt != nil {
                if won.set() {
                    group.cancelAll()
                    return (rtt, address)
                }
            }
            return (nil, nil)
        }
    }
}

/// Set once, by whoever comes first.
final class Flag: Sendable {
    private let value = NIOLockedValueBox(false)

    var isSet: Bool { value.withLockedValue { $0 } }

    /// Sets the flag; true for the caller that set it first.
    func set() -> Bool {
        value.withLockedValue { value in
            defer { value = true }
            return !value
        }
    }
}
