public import DNSWire

/// A message that arrived, decoded, with where it came from.
public struct ReceivedMessage: Sendable {
    public var message: Message
    public var source: SocketAddress
    public var interface: NetworkInterface
    public var family: IPFamily
    /// Whether the source address is on the link of `interface` (a unicast reply may go only
    /// there; RFC 6762 §11 and the CVE-2017-6519 class of amplification).
    public var sourceIsOnLink: Bool
    /// Whether it was sent to the mDNS group (every host on the link saw it), not to us alone.
    public var destinationIsMulticast: Bool

    public init(
        message: Message, source: SocketAddress, interface: NetworkInterface, family: IPFamily,
        sourceIsOnLink: Bool = true, destinationIsMulticast: Bool = true
    ) {
        self.message = message
        self.source = source
        self.interface = interface
        self.family = family
        self.sourceIsOnLink = sourceIsOnLink
        self.destinationIsMulticast = destinationIsMulticast
    }

    /// A "legacy" unicast query comes from a port other than 5353 (RFC 6762 §6.7).
    public var isLegacyUnicast: Bool { source.port != SocketAddress.mdnsPort }
}

/// Where a message goes.
public enum Destination: Hashable, Sendable {
    /// The mDNS group of `family` (224.0.0.251 or ff02::fb, port 5353) on the interface.
    case multicast(IPFamily)
    /// One host.
    case unicast(SocketAddress)
}

/// A message the engine wants sent.
public struct OutgoingMessage: Sendable {
    public var message: Message
    public var destination: Destination
    public var interface: NetworkInterface

    public init(message: Message, destination: Destination, interface: NetworkInterface) {
        self.message = message
        self.destination = destination
        self.interface = interface
    }
}

extension OutgoingMessage {
    /// The largest UDP payload for this message's destination on a 1500-byte MTU: 1472 bytes
    /// over IPv4, 1452 over IPv6 (its header is 20 bytes longer). A larger IPv6 datagram is
    /// not sent whole, and a burst of them was lost in the lab (RFC 6762 §17: stay within the
    /// interface MTU).
    public var packetLimit: Int {
        switch destination {
        case .multicast(.v6): Message.defaultMaximumPacketSize - 20
        case .multicast(.v4): Message.defaultMaximumPacketSize
        case .unicast(let address): address.address.isIPv6 ? Message.defaultMaximumPacketSize - 20 : Message.defaultMaximumPacketSize
        }
    }

    /// Packs messages that go to the same place at the same moment into as few packets as the
    /// size limit allows (RFC 6762 §8.1 asks this of probes, and §6 lets a responder aggregate
    /// answers). A host with 1,000 services otherwise sends 1,000 probes and 1,000
    /// announcements, each in a packet of its own.
    ///
    /// - Probes join probes: their questions and proposed records (authority section) stay in
    ///   one packet, which the simultaneous-probe tiebreak needs (§8.2), so a probe group is
    ///   closed before it would outgrow ``packetLimit``.
    /// - Multicast responses join multicast responses: answers are merged (each once), and
    ///   additional records that are already answers, or listed before, are left out; the
    ///   encoder splits what exceeds ``packetLimit`` into more packets.
    /// - Queries with known answers, legacy-unicast responses (they echo the question and the
    ///   ID), truncated messages and anything sent to one host alone go as they are.
    ///
    /// Order is kept among the messages for one destination; each packed message takes the
    /// place of its first part.
    public static func packed(_ messages: [OutgoingMessage]) -> [OutgoingMessage] {
        guard messages.count > 1 else { return messages }
        var result: [OutgoingMessage] = []
        /// Where the open group of each kind and place is in `result`, and its size so far.
        var open: [GroupKey: (index: Int, size: Int)] = [:]
        /// The answers and additionals of each response group so far, by its index in `result`.
        var listed: [Int: (answers: Set<ResourceRecord>, additionals: Set<ResourceRecord>)] = [:]
        for outgoing in messages {
            guard let kind = Kind(outgoing) else {
                result.append(outgoing)
                continue
            }
            let key = GroupKey(kind: kind, destination: outgoing.destination, interface: outgoing.interface)
            switch kind {
            case .probe:
                let limit = outgoing.packetLimit
                // Its size alone, less the header the group already has.
                let size = ((try? outgoing.message.encoded().count) ?? limit + 1) - 12
                if let group = open[key], group.size + size <= limit {
                    result[group.index].message.questions += outgoing.message.questions
                    result[group.index].message.authorities += outgoing.message.authorities
                    open[key] = (group.index, group.size + size)
                } else {
                    open[key] = (result.count, size + 12)
                    result.append(outgoing)
                }
            case .response:
                let index: Int
                if let group = open[key] {
                    index = group.index
                } else {
                    index = result.count
                    open[key] = (index, 0)
                    var empty = outgoing
                    empty.message.answers = []
                    empty.message.additionals = []
                    result.append(empty)
                    listed[index] = ([], [])
                }
                // In place: a copy of the sets per message would make packing quadratic.
                for answer in outgoing.message.answers where listed[index, default: ([], [])].answers.insert(answer).inserted {
                    result[index].message.answers.append(answer)
                }
                for extra in outgoing.message.additionals where listed[index, default: ([], [])].additionals.insert(extra).inserted {
                    result[index].message.additionals.append(extra)
                }
            }
        }
        // An additional record that became an answer of its group goes once, as the answer.
        for (index, seen) in listed where !seen.additionals.isDisjoint(with: seen.answers) {
            result[index].message.additionals.removeAll { seen.answers.contains($0) }
        }
        return result
    }

    private enum Kind: Hashable {
        case probe, response

        init?(_ outgoing: OutgoingMessage) {
            let message = outgoing.message
            guard message.header.id == 0, !message.header.isTruncated, case .multicast = outgoing.destination else { return nil }
            if message.isProbe, message.answers.isEmpty, message.additionals.isEmpty {
                self = .probe
            } else if message.header.isResponse, message.questions.isEmpty, message.authorities.isEmpty {
                self = .response
            } else {
                return nil
            }
        }
    }

    private struct GroupKey: Hashable {
        var kind: Kind
        var destination: Destination
        var interface: NetworkInterface
    }
}
