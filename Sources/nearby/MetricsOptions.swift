import ArgumentParser
import DNSWire
import Logging

/// `--metrics ADDRESS:PORT`: the long-running commands' Prometheus endpoint (off by default).
struct MetricsOptions: ParsableArguments {
    @Option(
        name: .customLong("metrics"),
        help: ArgumentHelp(
            "Serve metrics for Prometheus over HTTP on this address and port (GET /metrics), e.g. 127.0.0.1:9153 or [::1]:9153. Off by default; the metrics are listed in Documentation/Operations.md.",
            valueName: "address:port"))
    var metrics: String?

    func validate() throws {
        if let metrics { _ = try MetricsAddress(validating: metrics) }
    }

    /// When `--metrics` was given: swift-metrics bootstrapped with the Prometheus exposition (so
    /// this must come before anything that makes metrics: the proxy, the registrar, a listener,
    /// the mDNS engine), and the endpoint listening. Nil when it was not.
    /// - Throws: `RuntimeFailure` when the address cannot be listened on.
    func start(logger: Logger) async throws -> MetricsEndpoint? {
        guard let metrics else { return nil }
        let address = try MetricsAddress(validating: metrics)
        let registry = MetricsExposition.bootstrap()
        return try await MetricsEndpoint.start(at: address, registry: registry, logger: logger)
    }
}

/// Where the metrics are served: an IP address (IPv6 in brackets) and a port, nothing else.
struct MetricsAddress: Equatable, Sendable, CustomStringConvertible {
    var address: IPAddress
    var port: Int

    /// What `--metrics` takes, for messages.
    static let allowed = "give an IP address of this host and a port, such as 127.0.0.1:9153 or [::1]:9153 (IPv6 in brackets; no host names)"

    init(address: IPAddress, port: Int) {
        self.address = address
        self.port = port
    }

    /// Parses `ADDRESS:PORT`; nil when the text is anything else.
    init?(_ text: String) {
        let host: Substring
        let port: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.first == ":" else { return nil }
            port = rest.dropFirst()
            guard let v6 = IPv6Address(String(host)) else { return nil }
            address = .v6(v6)
        } else {
            guard let colon = text.lastIndex(of: ":"), text.firstIndex(of: ":") == colon else { return nil }
            host = text[..<colon]
            port = text[text.index(after: colon)...]
            guard let v4 = IPv4Address(String(host)) else { return nil }
            address = .v4(v4)
        }
        guard !port.isEmpty, port.allSatisfy(\.isASCII), port.allSatisfy(\.isNumber), port.count <= 5, let number = Int(port),
            (1...65535).contains(number)
        else { return nil }
        self.port = number
    }

    /// ``init(_:)``, with a message saying what is allowed when the text is not an address and port.
    init(validating text: String) throws {
        guard let parsed = MetricsAddress(text) else {
            throw ValidationError("--metrics \(text) is not ADDRESS:PORT; \(Self.allowed)")
        }
        self = parsed
    }

    var description: String {
        switch address {
        case .v4: "\(address):\(port)"
        case .v6: "[\(address)]:\(port)"
        }
    }
}
