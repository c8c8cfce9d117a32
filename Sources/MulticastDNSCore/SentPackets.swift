/// The packets an engine multicast lately, to know them again when they come back: the
/// multicast loop returns each on the interface it left by, and every other interface of this
/// machine on the same link (a second NIC on the same switch, Wi-Fi bridged to the wired LAN)
/// hears it once more (RFC 6762 §14). A copy does not use its entry up, so no copy of ours is
/// taken for another mDNS stack on this machine (§15).
public struct SentPackets: Sendable {
    private var packets: [(bytes: [UInt8], time: Duration)] = []
    /// How long a packet is known again: far longer than any copy takes to come back.
    public static let memory: Duration = .seconds(2)

    public init() {}

    /// Notes a packet multicast at `now`.
    public mutating func note(_ bytes: [UInt8], at now: Duration) {
        packets.append((bytes, now))
    }

    /// Forgets the packets multicast more than ``memory`` before `now`.
    public mutating func forget(before now: Duration) {
        packets.removeAll { now - $0.time > Self.memory }
    }

    /// Whether `bytes` is a packet we multicast (and have not forgotten).
    public func contains(_ bytes: [UInt8]) -> Bool {
        packets.contains { $0.bytes == bytes }
    }
}
