import ArgumentParser
import DNSWire
import Logging
import NetworkPlatform
import PeerTrust
import ServiceLifecycle
import UnicastDNSSD

/// `--registrar` and its companions: registering with an SRP registrar (RFC 9665) instead of
/// (advertise) or beside (serve) mDNS, signed with this peer's identity key.
struct RegistrarOptions: ParsableArguments {
    @Option(name: .customLong("registrar"), help: ArgumentHelp(
        "Register with this SRP registrar (RFC 9665), e.g. `nearby registrar` on a container's host: ADDRESS or ADDRESS:PORT (default port 53), or a DOMAIN whose _dnssd-srp._udp SRV names one (asked of this host's resolver).",
        valueName: "address"))
    var registrar: String?

    @Option(name: .customLong("register-address"), help: ArgumentHelp(
        "With --registrar: an address to register for this host (repeatable; default: every address of this host but loopback and link-local).",
        valueName: "address"))
    var addresses: [String] = []

    @Option(name: .customLong("lease"), help: ArgumentHelp("With --registrar: the lease to ask for, in seconds (the registrar grants 30 s to 24 h).", valueName: "seconds"),
            transform: NumberInput.integer("--lease", 30...86_400, use: "30-86400 seconds"))
    var lease: Int = 7200

    func validate() throws {
        if let registrar {
            if (try? DNSServer(parsing: registrar)) == nil {
                guard let domain = try? DomainName(parsing: registrar), domain.labelCount >= 1, !domain.hasSuffix("local.") else {
                    throw ValidationError("--registrar \(registrar) is neither an address (192.0.2.1, 192.0.2.1:53, [2001:db8::1]:53) nor a domain whose registrar to look up")
                }
            }
            _ = try registeredAddresses()
        } else if !addresses.isEmpty {
            throw ValidationError("--register-address is for --registrar: the addresses the registrar advertises for this host")
        }
    }

    /// The addresses to register: those given, else every address of this host that other hosts
    /// can reach (not loopback, not link-local, not a container bridge of this host).
    func registeredAddresses() throws -> [IPAddress] {
        if !addresses.isEmpty {
            return try addresses.map { text in
                if let v4 = IPv4Address(text) { return .v4(v4) }
                if let v6 = IPv6Address(text) { return .v6(v6) }
                throw ValidationError("--register-address \(text) is not an IP address; give one the registrar's link can reach, such as 172.17.0.2")
            }
        }
        // Those other hosts can reach, as a DNS registration gives them (no loopback, no
        // link-local, no container bridge of this host).
        return DNSRegistration.hostAddresses()
    }

    /// Registers `service` for this host with the registrar, signed by `identity`; throws a
    /// ``RuntimeFailure`` saying why the registrar refused or could not be reached.
    func register(
        _ service: SRPRequest.Service, hostLabel: String?, identity: PeerIdentity, logger: Logger
    ) async throws -> (SRPRegistration, hostLabel: String, addresses: [IPAddress]) {
        guard let registrar else { throw RuntimeFailure("no --registrar given") }
        let addresses = try registeredAddresses()
        guard !addresses.isEmpty else {
            throw RuntimeFailure("this host has no address the registrar's link could use (only loopback or link-local ones); give one with --register-address")
        }
        let label = hostLabel ?? NetworkPlatform.hostLabel() ?? "nearby"
        do {
            let server = try await SRPRegistration.locate(registrar, logger: logger)
            let registration = try await SRPRegistration.register(
                [service], hostLabel: label, addresses: addresses, publicKey: try identity.rawPublicKey(), lease: UInt32(lease),
                signer: { bytes in try identity.signRaw(bytes) }, registrar: server, logger: logger)
            return (registration, label, addresses)
        } catch let error as UnicastDNSError {
            throw RuntimeFailure(error.message)
        }
    }
}

/// An SRP registration as a service of a command's `ServiceGroup`: refreshed while the group
/// runs, removed (goodbyes on the registrar's link) when it shuts down.
struct RegistrationService: Service {
    let registration: SRPRegistration
    let logger: Logger

    func run() async throws {
        let logger = logger
        await cancelWhenGracefulShutdown {
            await registration.keepRefreshed { logger.warning("\($0)") }
        }
        do {
            try await registration.remove()
        } catch {
            logger.warning("the registration could not be removed: \(error.message) (it lasts until its lease runs out)")
        }
    }
}
