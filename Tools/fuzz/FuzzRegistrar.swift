// libFuzzer target for the SRP registrar's machine (SRPRegistrarCore): what a stranger sends a
// registrar. Tools/fuzz/build compiles this file into the SAME module as
// Sources/SRPRegistrarCore/*.swift.
//
// The verifier is a stand-in (there is no OpenSSL here): a signature of 64 bytes that are all
// 0x01 verifies, any other does not, so the fuzzer reaches what lies past SIG(0) checking (its
// seeds carry such signatures; see seeds-registrar/README). Properties, each a trap libFuzzer
// saves:
//
//  R1 handle() never traps; a reply decodes, is a response (QR set) with the request's ID and
//     OPCODE; a request whose header is unreadable, or a response, draws no action at all.
//  R2 nothing reaches the LAN without NOERROR: an update refused draws no publish or withdraw.
//  R3 what is published is inside the zone: host, instances, types and SRV targets under
//     default.service.arpa., a service's SRV naming a host the machine holds, at most the
//     limit of addresses per host, TTLs no longer than the lease granted.
//  R4 played again from another key, the same update never takes a held name (YXDOMAIN or a
//     refusal before it, never NOERROR with a publish).
//  R5 the saved state restores: the same hosts published, and time passing (leases, key
//     leases) never traps.

import DNSWire
import NearbyBasics

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: count == 0 ? nil : start, count: count)
    FuzzRegistrar(input: Array(input)).run()
    return 0
}

struct FuzzRegistrar {
    let input: [UInt8]
    static let zone: DomainName = "default.service.arpa."
    static let source = IPAddress.v4(IPv4Address(198, 18, 2, 6))
    static let verifier = SIG0Verifier { _, _, signature in signature.count == 64 && signature.allSatisfy { $0 == 1 } }

    func fail(_ property: String, _ detail: String) -> Never {
        fuzzFailure("registrar", property, detail, input: input)
    }

    func machine() -> RegistrarStateMachine {
        RegistrarStateMachine(configuration: RegistrarConfiguration(verifier: Self.verifier))
    }

    func run() {
        var registrar = machine()
        let actions = registrar.handle(input, from: Self.source, now: .zero)
        check(actions, registrar: registrar)
        guard actions.reply.map({ ResponseCode(UInt16($0.header.responseCode)) }) == .noError else { return }

        // R4: the same names from another key (the KEY's first byte changed, which the stand-in
        // verifier cannot tell) must not be taken.
        if let other = otherKey(input) {
            let again = registrar.handle(other, from: .v4(IPv4Address(198, 18, 2, 7)), now: .seconds(1))
            let code = again.reply.map { ResponseCode(UInt16($0.header.responseCode)) }
            if code == .noError, again.contains(where: \.isPublish) {
                fail("R4", "another key took a held name: \(again)")
            }
        }
        // R5: saved and restored, the same hosts are published; then leases and key leases run out.
        let saved = registrar.savedState(now: .seconds(2), wallClock: 1_800_000_000)
        var restored = machine()
        do {
            _ = try restored.restore(saved, now: .zero, wallClock: 1_800_000_002)
        } catch {
            fail("R5", "a state the machine saved does not restore: \(error)\n\(saved)")
        }
        if restored.publishedHosts.map(\.host.name) != registrar.publishedHosts.map(\.host.name) {
            fail("R5", "restored \(restored.publishedHosts.map(\.host.name)), saved \(registrar.publishedHosts.map(\.host.name))")
        }
        var time = Duration.seconds(2)
        while let next = registrar.nextDeadline, next > time, time < .seconds(86_400 * 30) {
            time = next
            _ = registrar.expire(now: time)
        }
    }

    func check(_ actions: [RegistrarAction], registrar: RegistrarStateMachine) {
        let header = input.count >= 12 ? (id: UInt16(input[0]) << 8 | UInt16(input[1]), opcode: (input[2] >> 3) & 0x0F, response: input[2] & 0x80 != 0) : nil
        if header == nil || header?.response == true, !actions.isEmpty {
            fail("R1", "an unreadable request or a response drew \(actions)")
        }
        var code: ResponseCode?
        var granted: UInt32?
        for case .reply(let message) in actions {
            guard let encoded = try? message.encoded(), let decoded = try? Message(decoding: encoded) else {
                fail("R1", "a reply that does not encode and decode: \(message)")
            }
            if !decoded.header.isResponse { fail("R1", "a reply without QR") }
            if let header, decoded.header.id != header.id || decoded.header.opcode != header.opcode {
                fail("R1", "a reply with ID \(decoded.header.id) OPCODE \(decoded.header.opcode) to \(header.id) \(header.opcode)")
            }
            code = ResponseCode(UInt16(decoded.header.responseCode))
            granted = (try? decoded.updateLease())??.lease
        }
        let lan = actions.filter { if case .reply = $0 { false } else { true } }
        if code != .noError, !lan.isEmpty { fail("R2", "refused (\(String(describing: code))) yet told the LAN \(lan)") }
        let held = Set(registrar.publishedHosts.map(\.host.name))
        for action in lan {
            switch action {
            case .publishHost(let host):
                if !host.name.hasSuffix(Self.zone) { fail("R3", "a host outside the zone: \(host.name)") }
                if host.addresses.count > RegistrarLimits().addressesPerHost { fail("R3", "\(host.addresses.count) addresses") }
                if let granted, host.ttl > granted { fail("R3", "host TTL \(host.ttl) over the lease \(granted)") }
            case .publishService(let service):
                for name in [service.instance, service.serviceType, service.srv.target] + service.subtypes where !name.hasSuffix(Self.zone) {
                    fail("R3", "a service name outside the zone: \(name)")
                }
                if !held.contains(service.srv.target) { fail("R3", "an SRV naming \(service.srv.target), a host not held") }
                if let granted, service.ttl > granted { fail("R3", "service TTL \(service.ttl) over the lease \(granted)") }
            default: break
            }
        }
    }

    /// The input with the KEY's first public-key byte changed (another key, as far as first
    /// come, first served is concerned), or nil when it has no readable KEY.
    func otherKey(_ bytes: [UInt8]) -> [UInt8]? {
        guard let message = try? Message(decoding: bytes) else { return nil }
        for record in message.authorities {
            guard case .unknown(let type, let rdata) = record.data, type == .key, rdata.count > 4,
                let index = bytes.firstRange(of: rdata)?.lowerBound
            else { continue }
            var changed = bytes
            changed[index + 4] ^= 0xFF
            return changed
        }
        return nil
    }
}

extension RegistrarAction {
    var isPublish: Bool {
        switch self {
        case .publishHost, .publishService: true
        default: false
        }
    }
}

extension Array where Element == RegistrarAction {
    var reply: Message? {
        for case .reply(let message) in self { return message }
        return nil
    }
}
