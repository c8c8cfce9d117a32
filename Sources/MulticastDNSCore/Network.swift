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
