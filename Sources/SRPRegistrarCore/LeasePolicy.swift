public import DNSWire

/// How long a registration and its key live: the bounds a registrar puts on what a requestor
/// asks for in the Update Lease option (RFC 9664), with the RFCs' reasons.
///
/// - The lease (LEASE) is how long the records live without a refresh. Below ``minimumLease``
///   a requestor would refresh so often that its updates become the traffic (RFC 9664 §4 asks
///   for no lease under 30 s; RFC 9665 §5.1 names the same floor); above ``maximumLease`` a
///   requestor that vanished without removing its records keeps them on the LAN for too long.
///   Outside the bounds the lease is clamped, not refused: RFC 9664 §4 lets the registrar grant
///   a lease other than the one asked, and the reply says which.
/// - The key lease (KEY-LEASE) is how long the KEY keeps its names after the records are gone
///   (first come, first served, RFC 9665 §3.3.3 and §5.1): long, so that a device that is off
///   for a while finds its name still its own, but bounded (``maximumKeyLease``), so that a
///   name nobody uses comes free. It is never shorter than the lease granted: a name whose
///   records are on the LAN is held. Without a KEY-LEASE (the option's 4-byte form, RFC 9664
///   §4) the key lease is the lease.
/// - A lease of 0 removes the records at once; a key lease of 0 with it releases the names too
///   (RFC 9665 §3.2.5.5).
public struct LeasePolicy: Sendable, Hashable {
    public var minimumLease: UInt32
    public var maximumLease: UInt32
    public var minimumKeyLease: UInt32
    public var maximumKeyLease: UInt32

    /// 30 s (RFC 9664 §4).
    public static let defaultMinimumLease: UInt32 = 30
    /// 24 hours.
    public static let defaultMaximumLease: UInt32 = 24 * 3600
    /// 30 s, the lease's floor: a key lease is raised to the lease granted anyway.
    public static let defaultMinimumKeyLease: UInt32 = 30
    /// 7 days.
    public static let defaultMaximumKeyLease: UInt32 = 7 * 24 * 3600

    public init(
        minimumLease: UInt32 = LeasePolicy.defaultMinimumLease, maximumLease: UInt32 = LeasePolicy.defaultMaximumLease,
        minimumKeyLease: UInt32 = LeasePolicy.defaultMinimumKeyLease,
        maximumKeyLease: UInt32 = LeasePolicy.defaultMaximumKeyLease
    ) {
        self.minimumLease = max(1, minimumLease)
        self.maximumLease = max(self.minimumLease, maximumLease)
        self.minimumKeyLease = max(1, minimumKeyLease)
        self.maximumKeyLease = max(self.minimumKeyLease, maximumKeyLease, self.maximumLease)
    }

    /// The lease and key lease granted for what was asked. A lease of 0 stays 0 (removal), and
    /// so does a key lease of 0 asked with it (release).
    public func grant(_ asked: UpdateLease) -> UpdateLease {
        guard asked.lease > 0 else {
            let keyLease = asked.keyLease ?? 0
            return UpdateLease(lease: 0, keyLease: keyLease == 0 ? 0 : min(max(keyLease, minimumKeyLease), maximumKeyLease))
        }
        let lease = min(max(asked.lease, minimumLease), maximumLease)
        let keyLease = min(max(asked.keyLease ?? lease, minimumKeyLease, lease), maximumKeyLease)
        return UpdateLease(lease: lease, keyLease: keyLease)
    }
}
