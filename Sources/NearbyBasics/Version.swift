/// The version of Nearby: this package, its modules and the `nearby` tool, which prints it
/// alone for `nearby --version`. It counts releases of the code (CHANGELOG.md says what each
/// changed) and says nothing about which peers can talk to each other: that is the protocol's
/// own version (PeerProtocol's `ProtocolVersion.current`, sent in `initialize` and announced in
/// TXT `pv`), which changes only when what goes over the wire changes.
public enum NearbyVersion {
    /// The version of this release, such as `0.3.0`.
    public static let current = "0.3.0"
}
