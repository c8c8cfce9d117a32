import NearbyBasics
import PeerConnection
import PeerTrust

/// Dials (or measures) a peer's addresses as ``DialPlan`` orders them: each attempt starts
/// 30 ms after the one before unless one has already answered, and the first answer wins.
enum HappyEyeballs {
    /// Races the addresses for reachability with a one-sample probe (no crypto), then opens the
    /// one connection to the first that answered; only if that fails are the others tried, in
    /// plan order. Racing whole connections instead (TLS, WebSocket, `initialize`) would leave
    /// the peer with connections it accepted for nothing whenever a set-up takes longer than the
    /// stagger, as it does on a busy machine.
    static func connect(
        _ plan: [(address: PeerAddress, after: Duration)], port: Int, expecting peer: PeerID, configuration: PeerConnectionConfiguration
    ) async -> Result<PeerConnection, PeerConnectionError> {
        guard !plan.isEmpty else { return .failure(PeerConnectionError(.unreachable, "the peer announced no address")) }
        let (_, winner) = await measure(plan, port: port, samples: 1, timeout: configuration.setupTimeout)
        let order = (winner.map { [$0] } ?? []) + plan.map(\.address).filter { $0 != winner }
        var errors: [PeerConnectionError] = []
        for address in order {
            do {
                return .success(
                    try await PeerConnection.connect(host: address.description, port: port, expecting: peer, configuration: configuration))
            } catch {
                errors.append(error)
                // A refusal is the peer's answer, whatever the address.
                if BrokerStateMachine.isRefusal(error.code) { return .failure(error) }
            }
        }
        return .failure(errors.first { $0.code != .unreachable } ?? errors.first ?? PeerConnectionError(.unreachable, "no address answered"))
    }

    /// The round-trip time of the first address to answer a probe, and that address. `progress`
    /// hears each address's dial, first question and silence as they happen; cancelling the
    /// task ends every probe at once.
    static func measure(
        _ plan: [(address: PeerAddress, after: Duration)], port: Int, samples: Int = 3, timeout: Duration,
        progress: (@Sendable (ProbeProgress) -> Void)? = nil
    ) async -> (Duration?, PeerAddress?) {
        await withTaskGroup(of: (Duration?, PeerAddress).self) { group in
            let won = Flag()
            for (address, after) in plan {
                group.addTask {
                    if after > .zero { try? await Task.sleep(for: after) }
                    guard !won.isSet, !Task.isCancelled else {
                        progress?(.silent(address))
                        return (nil, address)
                    }
                    progress?(.dialing(address))
                    var asked: (@Sendable () -> Void)?
                    if let progress { asked = { progress(.asked(address)) } }
                    let rtt = await PeerConnection.measureRoundTrip(
                        host: address.description, port: port, samples: samples, timeout: timeout, asked: asked)
                    if rtt == nil { progress?(.silent(address)) }
                    return (rtt, address)
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
    private let value = Locked(false)

    var isSet: Bool { value.withLockedValue { $0 } }

    /// Sets the flag; true for the caller that set it first.
    func set() -> Bool {
        value.withLockedValue { value in
            defer { value = true }
            return !value
        }
    }
}
