public import DNSWire
package import Logging
package import NearbyBasics

/// Signs the bytes SIG(0) covers with the private key of the request's KEY, returning the
/// signature (r ‖ s for ECDSA P-256). The caller holds the key (PeerTrust's identity), so this
/// module stays free of cryptography libraries.
public typealias SRPSigner = @Sendable ([UInt8]) throws -> [UInt8]

/// A host's services kept registered with an SRP registrar (RFC 9665): the first update is
/// sent by ``register(_:signer:registrar:client:)``, which returns once the registrar has
/// accepted it (or throws why not); ``keepRefreshed(logger:)`` sends it again before each
/// lease runs out, until cancelled; ``remove()`` withdraws everything (lease 0) and keeps the
/// names held for the key lease, as RFC 9665 §3.2.5.5 describes.
public final class SRPRegistration: Sendable {
    public let request: SRPRequest
    public let registrar: DNSServer
    /// The lease the registrar granted last (it may shorten or lengthen what was asked).
    public var granted: UpdateLease { state.withLockedValue { $0 } }
    private let state: Locked<UpdateLease>
    private let signer: SRPSigner
    private let client: DNSClient

    private init(request: SRPRequest, registrar: DNSServer, granted: UpdateLease, signer: @escaping SRPSigner, client: DNSClient) {
        self.request = request
        self.registrar = registrar
        state = Locked(granted)
        self.signer = signer
        self.client = client
    }

    /// Registers `request` with `registrar`, signed by `signer`.
    /// - Throws: ``UnicastDNSError`` saying why the registrar refused (a name held by another
    ///   key, a signature it did not accept, a zone it does not serve), or that it did not answer.
    public static func register(
        _ request: SRPRequest, signer: @escaping SRPSigner, registrar: DNSServer, client: DNSClient
    ) async throws(UnicastDNSError) -> SRPRegistration {
        let granted = try await send(request, signer: signer, to: registrar, client: client)
        return SRPRegistration(request: request, registrar: registrar, granted: granted, signer: signer, client: client)
    }

    /// Sends the update again at 80 % of each lease (RFC 9665 §3.2.5.4 asks for a refresh
    /// before it runs out), until the task is cancelled; a refresh that fails is tried again
    /// after 5 s, 10 s, … (never later than the lease allows). Returns when cancelled.
    public func keepRefreshed(logger: ((String) -> Void)? = nil) async {
        await keepRefreshed(clock: SystemClock(), logger: logger)
    }

    /// ``keepRefreshed(logger:)`` on `clock` (tests drive it by hand).
    package func keepRefreshed(clock: any ShellClock, logger: ((String) -> Void)? = nil) async {
        var retry: Duration = .seconds(5)
        var wait = Self.refreshDelay(granted)
        while !Task.isCancelled {
            guard (try? await clock.sleep(for: wait)) != nil else { return }
            do {
                let lease = try await Self.send(request, signer: signer, to: registrar, client: client)
                state.withLockedValue { $0 = lease }
                wait = Self.refreshDelay(lease)
                retry = .seconds(5)
            } catch {
                logger?("refreshing the registration with \(registrar) failed: \(error.message); trying again in \(retry)")
                wait = retry
                retry = min(retry * 2, max(.seconds(5), Self.refreshDelay(granted)))
            }
        }
    }

    /// Withdraws the services and the host (an update with lease 0); the names stay held for
    /// the key lease, so nobody else takes them meanwhile.
    public func remove() async throws(UnicastDNSError) {
        var removal = request
        removal.lease = UpdateLease(lease: 0, keyLease: granted.keyLease ?? request.lease.keyLease)
        _ = try await Self.send(removal, signer: signer, to: registrar, client: client)
    }

    /// The registrar of `domain`, as RFC 9665 §3.1 finds it: the SRV record of
    /// `_dnssd-srp._udp.<domain>` (a discovery proxy with `--registrar-port` answers it), its
    /// target's address, and its port.
    /// - Throws: ``UnicastDNSError`` when the domain names no registrar, or its name has no address.
    public static func findRegistrar(in domain: DomainName, client: DNSClient) async throws(UnicastDNSError) -> DNSServer {
        let name: DomainName
        do {
            name = try domain.prepending(Array("_udp".utf8)).prepending(Array("_dnssd-srp".utf8))
        } catch {
            throw UnicastDNSError(.invalidInput, "\(domain) is too long to hold a registrar's name")
        }
        let answer = try await client.query(name, .srv)
        let found = answer.answers.compactMap { record -> SRVData? in
            if case .srv(let srv) = record.data, record.name == name { return srv }
            return nil
        }.sorted { $0.priority < $1.priority }
        guard let srv = found.first else {
            throw UnicastDNSError(
                .noSuchZone, "\(domain.description.dropLast()) names no SRP registrar (no SRV record for \(name)); give the registrar's address instead")
        }
        for type in [RecordType.a, .aaaa] {
            let addresses = try await client.query(srv.target, type).answers.compactMap { record -> IPAddress? in
                switch record.data {
                case .a(let v4) where record.name == srv.target: .v4(v4)
                case .aaaa(let v6) where record.name == srv.target: .v6(v6)
                default: nil
                }
            }
            if let address = addresses.first { return DNSServer(address, port: srv.port) }
        }
        throw UnicastDNSError(.unreachable, "the registrar \(srv.target) of \(domain.description.dropLast()) has no address")
    }

    /// When to refresh a lease: at 80 % of it, never sooner than 1 s.
    static func refreshDelay(_ lease: UpdateLease) -> Duration {
        max(.seconds(1), .milliseconds(Int64(lease.lease) * 800))
    }

    /// One update, signed, sent and answered: the lease granted, or why not.
    static func send(
        _ request: SRPRequest, signer: SRPSigner, to registrar: DNSServer, client: DNSClient
    ) async throws(UnicastDNSError) -> UpdateLease {
        let id = UInt16.random(in: .min ... .max)
        let bytes: [UInt8]
        let message: Message
        do {
            message = try request.unsignedMessage(id: id)
        } catch {
            throw UnicastDNSError(.invalidInput, "cannot encode the registration: \(error)")
        }
        do throws(SRPRequestError<SignerFailure>) {
            bytes = try request.signed(id: id, now: UInt32(clamping: DNSClient.unixTime())) { (covered: [UInt8]) throws(SignerFailure) -> [UInt8] in
                do { return try signer(covered) } catch { throw SignerFailure(reason: "\(error)") }
            }
        } catch {
            switch error {
            case .encoding(let failure): throw UnicastDNSError(.invalidInput, "cannot encode the registration: \(failure)")
            case .signing(let failure): throw UnicastDNSError(.invalidInput, "cannot sign the registration: \(failure.reason)")
            }
        }
        let answer = try await client.exchange(message, bytes: bytes, servers: [registrar]).message
        let code = answer.responseCode
        guard code == .noError else { throw Self.refusal(code, request: request, registrar: registrar) }
        return (try? answer.updateLease()) ?? request.lease
    }

    struct SignerFailure: Error {
        var reason: String
    }

    /// A refusal in words that say what to do.
    static func refusal(_ code: ResponseCode, request: SRPRequest, registrar: DNSServer) -> UnicastDNSError {
        let names = ([request.hostLabel] + request.services.map { "\"\($0.instance)\"" }).joined(separator: ", ")
        switch code {
        case .nameExists:
            return UnicastDNSError(
                .nameTaken,
                "\(registrar) refused: a name of this registration (\(names)) is held by another key, or already in use on the link; choose another name",
                responseCode: code)
        case .notAuthoritative, .badSignature, .badKey:
            return UnicastDNSError(
                .notAuthorized, "\(registrar) did not accept the registration's signature (\(code)): the KEY and the SIG(0) must be the same P-256 key",
                responseCode: code)
        case .refused:
            return UnicastDNSError(
                .refused, "\(registrar) refused the registration: it does not serve \(request.zone), or a limit was reached (registrations, updates per second)",
                responseCode: code)
        case .notZone:
            return UnicastDNSError(.refused, "\(registrar) does not serve the zone \(request.zone)", responseCode: code)
        case .formatError:
            return UnicastDNSError(.serverFailure, "\(registrar) found the registration malformed (FORMERR)", responseCode: code)
        default:
            return UnicastDNSError(.serverFailure, "\(registrar) answered \(code)", responseCode: code)
        }
    }
}

extension SRPRegistration {
    /// The registrar a person named: `ADDRESS` or `ADDRESS:PORT` (port 53 by default), or a
    /// DOMAIN whose `_dnssd-srp._udp` SRV record names it, asked of this host's resolver (RFC
    /// 9665 §3.1). What `nearby advertise --registrar` and the front door's `registrar:` take.
    /// - Throws: ``UnicastDNSError`` when the text is neither, or the domain names no registrar.
    package static func locate(_ text: String, logger: Logger) async throws(UnicastDNSError) -> DNSServer {
        if let address = try? DNSServer(parsing: text) { return address }
        guard let domain = try? DomainName(parsing: text), domain.labelCount >= 1, !domain.hasSuffix("local.") else {
            throw UnicastDNSError(
                .invalidInput,
                "the registrar \"\(text.prefix(60))\" is neither an address (192.0.2.1, 192.0.2.1:53, [2001:db8::1]:53) nor a domain whose registrar to look up")
        }
        return try await findRegistrar(in: domain, client: DNSClient(configuration: .system(), logger: logger))
    }

    /// Registers `services` for this host (`hostLabel` at `addresses`) with `registrar`, under
    /// the P-256 key `publicKey` whose private half `signer` holds: the lease asked for, and a key
    /// lease of at least a week, so the names stay this key's across restarts of the requestor.
    package static func register(
        _ services: [SRPRequest.Service], hostLabel: String, addresses: [IPAddress], publicKey: [UInt8], lease: UInt32,
        signer: @escaping SRPSigner, registrar: DNSServer, logger: Logger
    ) async throws(UnicastDNSError) -> SRPRegistration {
        guard !addresses.isEmpty else {
            throw UnicastDNSError(
                .invalidInput,
                "this host has no address the registrar's link could use (only loopback or link-local ones); name one to register")
        }
        let request = SRPRequest(
            hostLabel: hostLabel, addresses: addresses, key: .p256(publicKey), services: services,
            lease: UpdateLease(lease: lease, keyLease: max(lease, 7 * 86_400)))
        let client = DNSClient(servers: [registrar], timeout: .seconds(2), attempts: 3, logger: logger)
        return try await register(request, signer: signer, registrar: registrar, client: client)
    }
}
