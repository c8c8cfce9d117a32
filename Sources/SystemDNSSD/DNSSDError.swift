/// A failure reported by the system's DNS-SD service (dns_sd), with the operation that failed.
public struct DNSSDError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The `kDNSServiceErr_*` code.
    public let code: Int32
    /// The dns_sd call that failed, e.g. `DNSServiceBrowse`.
    public let operation: String

    /// More about the failure, when dns_sd's code does not say it all (why the library did
    /// not load).
    public let detail: String?

    public init(code: Int32, operation: String, detail: String? = nil) {
        self.code = code
        self.operation = operation
        self.detail = detail
    }

    /// True when the dns_sd library itself is missing (Avahi's compatibility library is not
    /// installed): no daemon can be reached through it.
    public var libraryMissing: Bool { code == Self.libraryNotLoaded }

    /// The code's name without its `kDNSServiceErr_` prefix, e.g. `NameConflict`.
    public var name: String { code == Self.libraryNotLoaded ? "LibraryNotLoaded" : Self.names[code] ?? "error \(code)" }

    /// True when the daemon could not be reached: Avahi's compatibility library reports a
    /// missing or vanished avahi-daemon as `Unknown`; mDNSResponder as `ServiceNotRunning`.
    public var daemonUnavailable: Bool { code == Self.unknown || code == Self.serviceNotRunning }

    public var description: String {
        if libraryMissing {
            return "the system backend needs Avahi's dns_sd library, which could not be loaded (\(detail ?? "libdns_sd.so.1")); "
                + "install libavahi-compat-libdnssd1 (Debian, Ubuntu) or use the embedded backend (--backend embedded)"
        }
        if daemonUnavailable {
            return "avahi-daemon is not running or not reachable over D-Bus (dns_sd: \(name)); start it "
                + "(sudo systemctl start avahi-daemon) or use the embedded backend"
        }
        return "\(operation) failed (dns_sd: \(name))"
    }

    /// Not a dns_sd code: the library could not be opened.
    static let libraryNotLoaded: Int32 = -1
    static let unknown: Int32 = -65537
    static let badParam: Int32 = -65540
    static let serviceNotRunning: Int32 = -65563

    private static let names: [Int32: String] = [
        -65537: "Unknown", -65538: "NoSuchName", -65539: "NoMemory", -65540: "BadParam", -65541: "BadReference",
        -65542: "BadState", -65543: "BadFlags", -65544: "Unsupported", -65545: "NotInitialized",
        -65547: "AlreadyRegistered", -65548: "NameConflict", -65549: "Invalid", -65550: "Firewall",
        -65551: "Incompatible", -65552: "BadInterfaceIndex", -65553: "Refused", -65554: "NoSuchRecord",
        -65555: "NoAuth", -65556: "NoSuchKey", -65557: "NATTraversal", -65558: "DoubleNAT", -65559: "BadTime",
        -65560: "BadSig", -65561: "BadKey", -65562: "Transient", -65563: "ServiceNotRunning",
    ]
}
