import DNSWire
import Foundation
import SRPRegistrarCore
import Testing

@Suite("SRP registrar: limits and saved state")
struct RegistrarLimitTests {
    @Test("an update flood from one source is limited to its bucket with REFUSED, counted; another source is not held back")
    func updateFlood() throws {
        let requestor = try Requestor()
        var registrar = makeRegistrar(limits: RegistrarLimits(updateRate: UpdateRate(perSecond: 2, burst: 5)))
        let update = try requestor.update()
        let answers = (0..<50).map { _ in registrar.handle(update, from: source, now: .seconds(1)).rcode }
        #expect(answers.filter { $0 == .noError }.count == 5)
        #expect(answers.filter { $0 == .refused }.count == 45)
        #expect(registrar.statistics.rateLimited == 45)
        #expect(registrar.handle(update, from: .v4(IPv4Address(192, 0, 2, 11)), now: .seconds(1)).rcode == .noError)
        // Refilled at 2 per second.
        #expect(registrar.handle(update, from: source, now: .seconds(2)).rcode == .noError)
        #expect(registrar.handle(update, from: source, now: .seconds(2)).rcode == .noError)
        #expect(registrar.handle(update, from: source, now: .seconds(2)).rcode == .refused)
    }

    @Test("registrations per source, in all, and services per host are limited with REFUSED; updates to held names still pass")
    func registrationLimits() throws {
        var registrar = makeRegistrar(limits: RegistrarLimits(registrationsPerSource: 2, registrations: 3, servicesPerHost: 2))
        var requestors: [Requestor] = []
        for index in 0..<4 {
            requestors.append(try Requestor(host: "host\(index)"))
        }
        func services(_ index: Int) -> [Requestor.Service] { [Requestor.Service(instance: "S\(index)")] }
        #expect(registrar.handle(try requestors[0].update(services: services(0)), from: source, now: .zero).rcode == .noError)
        #expect(registrar.handle(try requestors[1].update(services: services(1)), from: source, now: .zero).rcode == .noError)
        #expect(registrar.handle(try requestors[2].update(services: services(2)), from: source, now: .zero).rcode == .refused)
        let elsewhere = IPAddress.v4(IPv4Address(198, 51, 100, 1))
        #expect(registrar.handle(try requestors[2].update(services: services(2)), from: elsewhere, now: .zero).rcode == .noError)
        #expect(registrar.handle(try requestors[3].update(services: services(3)), from: elsewhere, now: .zero).rcode == .refused)
        #expect(registrar.statistics.limitReached == 2)
        // A refresh of a registration already held is no new registration.
        #expect(registrar.handle(try requestors[0].update(services: services(0), id: 7), from: source, now: .seconds(1)).rcode == .noError)
        let three = (0..<3).map { Requestor.Service(instance: "Many \($0)") }
        #expect(registrar.handle(try requestors[0].update(services: three, id: 8), from: source, now: .seconds(2)).rcode == .refused)
    }

    @Test("bytes of records held per source and in all are limited with REFUSED; a refresh replaces its host's bytes instead of adding them; a removal always passes")
    func byteLimits() throws {
        // 812 bytes each: 404 of TXT, the PTR, SRV and TXT records' names, the host's two
        // address records and its KEY (202 of them stay held after a removal: the host's names).
        let txt = ["a=" + String(repeating: "x", count: 250), "b=" + String(repeating: "y", count: 148)]
        func service(_ name: String) -> [Requestor.Service] { [Requestor.Service(instance: name, txt: txt)] }
        let first = try Requestor(host: "first")
        let second = try Requestor(host: "second")
        // Room for one such registration per source, and for two in all (and a removed host's names).
        var registrar = makeRegistrar(limits: RegistrarLimits(bytesPerSource: 1000, bytes: 1900))
        #expect(registrar.handle(try first.update(services: service("One")), from: source, now: .zero).rcode == .noError)
        // The same host again, with as much: it replaces its own bytes.
        #expect(registrar.handle(try first.update(services: service("One"), id: 2), from: source, now: .seconds(1)).rcode == .noError)
        // Another host from the same source: over the source's budget.
        #expect(registrar.handle(try second.update(services: service("Two")), from: source, now: .seconds(1)).rcode == .refused)
        #expect(registrar.statistics.limitReached == 1)
        let elsewhere = IPAddress.v4(IPv4Address(198, 51, 100, 1))
        #expect(registrar.handle(try second.update(services: service("Two")), from: elsewhere, now: .seconds(1)).rcode == .noError)
        // A third host from a third source: over the budget in all.
        let third = try Requestor(host: "third")
        #expect(registrar.handle(try third.update(services: service("Three")), from: .v4(IPv4Address(198, 51, 100, 2)), now: .seconds(1)).rcode == .refused)
        #expect(registrar.statistics.limitReached == 2)
        // Removing frees no more than it held, and is never refused for room.
        #expect(registrar.handle(try first.update(services: service("One"), lease: UpdateLease(lease: 0, keyLease: 3600), id: 3), from: source, now: .seconds(2)).rcode == .noError)
        #expect(registrar.handle(try third.update(services: service("Three")), from: .v4(IPv4Address(198, 51, 100, 2)), now: .seconds(2)).rcode == .noError)
    }

    @Test("saved state round-trips: names, keys and leases restored, time away taken off, the live ones published again")
    func savedStateRoundTrip() throws {
        let live = try Requestor(host: "live")
        let quiet = try Requestor(host: "quiet")
        var registrar = makeRegistrar()
        _ = registrar.handle(
            try live.update(services: [Requestor.Service(instance: "Live One", txt: ["a=1", "b"], subtypes: ["_x"])], lease: UpdateLease(lease: 3600, keyLease: 86400)),
            from: source, now: .zero)
        _ = registrar.handle(try quiet.update(services: [Requestor.Service(instance: "Quiet")], lease: UpdateLease(lease: 60, keyLease: 7200)), from: source, now: .zero)
        _ = registrar.expire(now: .seconds(60))
        let text = registrar.savedState(now: .seconds(100), wallClock: 1_000_100)
        #expect(text.hasPrefix(RegistrarStateMachine.stateHeader + "\n"))

        // A new process: its own origin; 500 s of wall clock went by.
        var restarted = makeRegistrar()
        let actions = try restarted.restore(text, now: .seconds(5), wallClock: 1_000_600)
        #expect(actions.count == 2)
        guard case .publishHost(let host) = actions.first, case .publishService(let service) = actions.last else {
            Issue.record("expected the live host and its service: \(actions)")
            return
        }
        #expect(host.name == live.hostName && host.key == live.key && host.addresses == live.addresses)
        #expect(service.instance == live.instanceName(Requestor.Service(instance: "Live One")))
        #expect(service.txt.strings == [Array("a=1".utf8), Array("b".utf8)])
        #expect(service.subtypes == [DomainName("_x._sub._openagents._tcp.default.service.arpa.")])
        #expect(service.srv.target == live.hostName)
        #expect(restarted.holder(of: quiet.hostName) == quiet.key)
        #expect(restarted.holder(of: quiet.instanceName(Requestor.Service(instance: "Quiet"))) == quiet.key)
        // Live's lease had 3500 s left at saving, 3000 s after the 500 s away.
        #expect(restarted.nextDeadline == .seconds(5 + 3000))
        let thief = try Requestor(host: "quiet")
        #expect(restarted.handle(try thief.update(), from: source, now: .seconds(6)).rcode == .nameExists)
        // Saved again, unchanged.
        #expect(restarted.savedState(now: .seconds(5), wallClock: 1_000_600) == registrar.savedState(now: .seconds(600), wallClock: 1_000_600))
        // Restored after every key lease ran out: nothing held.
        var late = makeRegistrar()
        #expect(try late.restore(text, now: .zero, wallClock: 1_000_100 + 90_000).isEmpty)
        #expect(late.registrationCount == 0)
    }

    @Test("garbage saved state fails cleanly and leaves the machine as it was")
    func garbageState() throws {
        let requestor = try Requestor()
        var registrar = makeRegistrar()
        _ = registrar.handle(try requestor.update(), from: source, now: .zero)
        let good = registrar.savedState(now: .zero, wallClock: 10)
        let lines = good.split(separator: "\n").map(String.init)
        let garbage = [
            "", "hello", "nearby-srp-registrar 2\nsaved 1\n", RegistrarStateMachine.stateHeader,
            RegistrarStateMachine.stateHeader + "\nsaved x\n",
            lines.dropLast().joined(separator: "\n"),  // cut short: no "end"
            good.replacingOccurrences(of: "key ", with: "key zz"),
            good.replacingOccurrences(of: "address ", with: "address 300.1."),
            good.replacingOccurrences(of: "service ", with: "service 0"),
            good.replacingOccurrences(of: "lease ", with: "lease -5"),
            good + "end\n",
            good + lines.dropFirst(2).joined(separator: "\n") + "\n",  // the host twice
            String(decoding: (0..<200).map { UInt8(truncatingIfNeeded: $0 &* 37) }, as: UTF8.self),
        ]
        for text in garbage {
            #expect(throws: RegistrarError.self, "accepted: \(text)") { try registrar.restore(text, now: .zero, wallClock: 10) }
            #expect(registrar.holder(of: requestor.hostName) == requestor.key)
        }
        // Every cut of a good file either reads (it ends between hosts) or fails cleanly.
        for cut in 0..<good.utf8.count {
            let text = String(decoding: Array(good.utf8.prefix(cut)), as: UTF8.self)
            do {
                _ = try registrar.restore(text, now: .zero, wallClock: 10)
                _ = try registrar.restore(good, now: .zero, wallClock: 10)
            } catch {
                #expect(error.code == .damagedState)
            }
            #expect(registrar.holder(of: requestor.hostName) == requestor.key)
        }
    }
}
