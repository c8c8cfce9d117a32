import Testing

@testable import PeerConnection

/// Admission of strangers, driven by hand: arrivals, progress, ends and time are the test's.
@Suite("admission: places for connections setting up, who makes room, deadlines, summaries")
struct AdmissionTests {
    static func source(_ last: UInt8) -> AdmissionSource { AdmissionSource(addressBytes: [198, 18, 1, last]) }
    static let pinned = source(3)

    static func admitted(_ result: (id: AdmissionControl.ID, arrival: AdmissionControl.Arrival)) -> (AdmissionControl.ID, [AdmissionControl.ID])? {
        guard case .admitted(let closing) = result.arrival else { return nil }
        return (result.id, closing)
    }

    @Test("a source is an IPv4 address or an IPv6 /64; a mapped IPv4 address counts as IPv4")
    func sources() {
        #expect(AdmissionSource(addressBytes: [10, 0, 0, 1]) == .ipv4(0x0A00_0001))
        let mapped: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 1]
        #expect(AdmissionSource(addressBytes: mapped) == .ipv4(0x0A00_0001))
        let one: [UInt8] = [0xFD, 0x6E, 0x62, 0x72, 0, 1, 0, 0] + [0, 0, 0, 0, 0, 0, 0, 1]
        let other: [UInt8] = [0xFD, 0x6E, 0x62, 0x72, 0, 1, 0, 0] + [0xAB, 0xCD, 0, 0, 0, 0, 0x12, 0x34]
        let elsewhere: [UInt8] = [0xFD, 0x6E, 0x62, 0x72, 0, 2, 0, 0] + [0, 0, 0, 0, 0, 0, 0, 1]
        #expect(AdmissionSource(addressBytes: one) == AdmissionSource(addressBytes: other))
        #expect(AdmissionSource(addressBytes: one) != AdmissionSource(addressBytes: elsewhere))
        #expect(AdmissionSource(addressBytes: [1, 2, 3]) == .unknown)
    }

    @Test("full of silent strangers from many sources: a newcomer gets a place, the oldest silent one makes room, every time")
    func newcomerAlwaysGetsIn() {
        var control = AdmissionControl(settings: AdmissionSettings(maximumSettingUp: 8, maximumPerSource: 4))
        var strangers: [AdmissionControl.ID] = []
        for index in 0..<8 {
            guard let (id, closing) = Self.admitted(control.arrived(from: Self.source(UInt8(100 + index)), at: .milliseconds(index))) else {
                Issue.record("refused while places were free")
                return
            }
            #expect(closing.isEmpty)
            strangers.append(id)
        }
        #expect(control.settingUp == 8)
        // 1,000 more strangers, each pushing out the oldest silent one: never more than 8 places.
        for index in 0..<1000 {
            guard let (_, closing) = Self.admitted(control.arrived(from: Self.source(UInt8(100 + index % 100)), at: .milliseconds(10 + index))) else {
                Issue.record("a newcomer was refused")
                return
            }
            #expect(closing.count == 1)
            #expect(control.settingUp == 8)
        }
        #expect(strangers.allSatisfy { control.stage(of: $0) == nil }, "the first strangers made room first")
        // The pinned peer arrives and sends its ClientHello at once: strangers keep coming, and
        // it keeps its place (only silent ones make room) until TLS is done.
        guard let (peer, _) = Self.admitted(control.arrived(from: Self.pinned, at: .seconds(2))) else {
            Issue.record("the pinned peer was refused")
            return
        }
        control.progressed(peer, to: .started)
        control.progressed(peer, to: .hello)
        for index in 0..<1000 {
            guard let (_, closing) = Self.admitted(control.arrived(from: Self.source(UInt8(index % 100)), at: .seconds(2) + .microseconds(index))) else {
                Issue.record("a newcomer was refused")
                return
            }
            #expect(!closing.contains(peer))
        }
        #expect(control.stage(of: peer) == .hello)
        control.progressed(peer, to: .proven)
        #expect(control.stage(of: peer) == .proven)
        #expect(control.ended(peer, failed: false) == .count)
        #expect(control.stage(of: peer) == nil)
    }

    @Test("a connection accepted moments ago (not read yet) is passed over while an older one, even a more advanced one, can make room")
    func youngAreSpared() {
        var control = AdmissionControl(settings: AdmissionSettings(maximumSettingUp: 2, maximumPerSource: 2))
        let old = control.arrived(from: Self.source(1), at: .zero).id
        control.progressed(old, to: .started)  // a half-sent hello, seconds old
        let peer = control.arrived(from: Self.pinned, at: .seconds(2)).id  // its hello not read yet
        let next = Self.admitted(control.arrived(from: Self.source(3), at: .seconds(2) + .milliseconds(10)))
        #expect(next?.1 == [old], "the young silent peer was closed instead of the old partial hello")
        #expect(control.stage(of: peer) == .silent)
        // Everyone young: the oldest of the least advanced goes, as before.
        let last = Self.admitted(control.arrived(from: Self.source(4), at: .seconds(2) + .milliseconds(20)))
        #expect(last?.1 == [peer])
    }

    @Test("who makes room: silent before partial hellos before whole hellos, the oldest first; proven peers never")
    func order() {
        var control = AdmissionControl(settings: AdmissionSettings(maximumSettingUp: 4, maximumPerSource: 4))
        let ids = (0..<4).compactMap { Self.admitted(control.arrived(from: Self.source(UInt8(10 + $0)), at: .milliseconds($0)))?.0 }
        #expect(ids.count == 4)
        control.progressed(ids[0], to: .proven)
        control.progressed(ids[1], to: .hello)
        control.progressed(ids[2], to: .started)  // ids[3] stays silent
        let first = Self.admitted(control.arrived(from: Self.source(20), at: .milliseconds(10)))
        #expect(first?.1 == [ids[3]])
        // Now the silent newcomer is the least advanced.
        let second = Self.admitted(control.arrived(from: Self.source(21), at: .milliseconds(11)))
        #expect(second?.1 == [first?.0].compactMap { $0 })
        guard let newest = second?.0 else { return }
        control.progressed(newest, to: .hello)
        let third = Self.admitted(control.arrived(from: Self.source(22), at: .milliseconds(12)))
        #expect(third?.1 == [ids[2]], "a partial hello goes before whole ones")
        guard let silent = third?.0 else { return }
        control.progressed(silent, to: .proven)
        let fourth = Self.admitted(control.arrived(from: Self.source(23), at: .milliseconds(13)))
        #expect(fourth?.1 == [ids[1]], "of two whole hellos, the older")
        guard let last = fourth?.0 else { return }
        control.progressed(last, to: .proven)
        control.progressed(newest, to: .proven)
        // Every place is held by a proven peer: the newcomer is refused, nobody is closed, and
        // nothing is kept about it (a stream of refusals costs no memory).
        let remembered = control.closedHereCount
        #expect(control.arrived(from: Self.source(24), at: .milliseconds(14)).arrival == .refused)
        #expect(control.settingUp == 4)
        #expect(control.closedHereCount == remembered)
    }

    @Test("one source beyond its share closes its own oldest silent connection, never another source's")
    func perSource() {
        var control = AdmissionControl(settings: AdmissionSettings(maximumSettingUp: 100, maximumPerSource: 3))
        let attacker = Self.source(66)
        guard let (peer, _) = Self.admitted(control.arrived(from: Self.pinned, at: .zero)) else { return }
        let own = (0..<3).compactMap { Self.admitted(control.arrived(from: attacker, at: .milliseconds(1 + $0)))?.0 }
        control.progressed(own[0], to: .hello)
        for index in 0..<50 {
            guard let (_, closing) = Self.admitted(control.arrived(from: attacker, at: .milliseconds(10 + index))) else {
                Issue.record("refused")
                return
            }
            #expect(closing.count == 1 && closing[0] != peer && closing[0] != own[0])
            #expect(control.settingUp(from: attacker) == 3)
        }
        #expect(control.stage(of: peer) == .silent)
        #expect(control.stage(of: own[0]) == .hello, "its most advanced connection stays")
        // IPv6: one /64 is one source.
        let prefix: [UInt8] = [0xFD, 0x6E, 0x62, 0x72, 0, 1, 0, 0]
        for host in 0..<10 {
            _ = control.arrived(from: AdmissionSource(addressBytes: prefix + [0, 0, 0, 0, 0, 0, 0, UInt8(host)]), at: .seconds(1))
        }
        #expect(control.settingUp(from: AdmissionSource(addressBytes: prefix + [UInt8](repeating: 0, count: 8))) == 3)
    }

    @Test("no whole ClientHello within the deadline: closed; a whole one in time: kept; their close is not counted twice")
    func helloDeadline() {
        var control = AdmissionControl(settings: AdmissionSettings(maximumSettingUp: 10, helloDeadline: .seconds(3)))
        let silent = control.arrived(from: Self.source(1), at: .zero).id
        let partial = control.arrived(from: Self.source(2), at: .milliseconds(500)).id
        let whole = control.arrived(from: Self.source(3), at: .seconds(1)).id
        control.progressed(partial, to: .started)
        control.progressed(whole, to: .started)
        control.progressed(whole, to: .hello)
        #expect(control.expired(at: .milliseconds(2999)).isEmpty)
        #expect(control.expired(at: .seconds(3)) == [silent])
        #expect(control.expired(at: .milliseconds(3499)).isEmpty)
        #expect(control.expired(at: .milliseconds(3500)) == [partial])
        #expect(control.expired(at: .seconds(60)).isEmpty, "a whole hello waits for the set-up timeout instead")
        #expect(control.stage(of: whole) == .hello)
        // The closes that follow are ours: not failures to report or count again.
        #expect(control.ended(silent, failed: true) == .count)
        #expect(control.ended(partial, failed: true) == .count)
        let summary = control.summary(at: .seconds(60))
        #expect(summary?.noHello == 2)
        #expect(summary?.failedUnreported == 0 && summary?.reported == 0)
    }

    @Test("a late connection whose loop then reads its ClientHello keeps its place: the close is confirmed after the read")
    func lateButRead() {
        var control = AdmissionControl(settings: AdmissionSettings(helloDeadline: .seconds(3)))
        let slow = control.arrived(from: Self.source(1), at: .zero).id
        let silent = control.arrived(from: Self.source(2), at: .zero).id
        #expect(control.late(at: .seconds(4)) == [slow, silent])
        // Its loop was held up; the hello waiting in its socket is read before the confirmation.
        control.progressed(slow, to: .started)
        control.progressed(slow, to: .hello)
        let slowExpired = control.expire(slow, at: .seconds(4))
        let silentExpired = control.expire(silent, at: .seconds(4))
        let silentAgain = control.expire(silent, at: .seconds(4))
        #expect(!slowExpired)
        #expect(silentExpired)
        #expect(!silentAgain, "once")
        #expect(control.stage(of: slow) == .hello)
        #expect(control.late(at: .seconds(10)).isEmpty)
    }

    @Test("failures: the first few in an interval are reported one by one, the rest only counted and summed up at its end")
    func summaries() {
        var control = AdmissionControl(settings: AdmissionSettings(maximumSettingUp: 2, summaryInterval: .seconds(10), reportedPerInterval: 2))
        var reports = 0
        for index in 0..<5 {
            let id = control.arrived(from: Self.source(UInt8(index)), at: .seconds(1)).id
            control.progressed(id, to: .hello)
            if control.ended(id, failed: true) == .report { reports += 1 }
        }
        #expect(reports == 2)
        #expect(control.summary(at: .seconds(9)) == nil, "the interval is not over")
        // Three silent strangers while two places are taken by... nobody: all admitted, then
        // two more make room.
        for index in 0..<4 { _ = control.arrived(from: Self.source(UInt8(50 + index)), at: .seconds(9)) }
        guard let summary = control.summary(at: .seconds(10)) else {
            Issue.record("no summary")
            return
        }
        #expect(summary.reported == 2 && summary.failedUnreported == 3 && summary.madeRoom == 2)
        #expect(summary.total == 7)
        #expect(summary.peakSettingUp == 2)
        #expect(summary.sources == 7)
        #expect(summary.text.contains("7 connections turned away from 7 sources"), "\(summary.text)")
        // An interval with only failures reported one by one needs no summary; a quiet one neither.
        var quiet = AdmissionControl(settings: AdmissionSettings(summaryInterval: .seconds(10), reportedPerInterval: 2))
        let id = quiet.arrived(from: Self.source(9), at: .seconds(1)).id
        #expect(quiet.ended(id, failed: true) == .report)
        #expect(quiet.summary(at: .seconds(10)) == nil)
        #expect(quiet.summary(at: .seconds(20)) == nil)
    }

    @Test("while places run short (and for the interval after), failures are only counted: under attack only the summary speaks")
    func quietUnderPressure() {
        var control = AdmissionControl(settings: AdmissionSettings(maximumSettingUp: 1, summaryInterval: .seconds(10), reportedPerInterval: 5))
        let early = control.arrived(from: Self.source(1), at: .seconds(1)).id
        #expect(control.ended(early, failed: true) == .report, "no pressure yet")
        _ = control.arrived(from: Self.source(2), at: .seconds(2))
        _ = control.arrived(from: Self.source(3), at: .seconds(2))  // makes room: pressure
        let during = control.arrived(from: Self.source(4), at: .seconds(3)).id
        #expect(control.ended(during, failed: true) == .count)
        #expect(control.summary(at: .seconds(10))?.failedUnreported == 1)
        let next = control.arrived(from: Self.source(5), at: .seconds(11)).id
        #expect(control.ended(next, failed: true) == .count, "the interval after an attack is still quiet")
        _ = control.summary(at: .seconds(20))
        let calm = control.arrived(from: Self.source(6), at: .seconds(21)).id
        #expect(control.ended(calm, failed: true) == .report, "after a calm interval, one by one again")
    }

    @Test("a connection that becomes a session leaves its place and is no failure; an end told twice counts once")
    func sessions() {
        var control = AdmissionControl(settings: AdmissionSettings(maximumSettingUp: 2, reportedPerInterval: 0))
        let id = control.arrived(from: Self.pinned, at: .zero).id
        control.progressed(id, to: .proven)
        #expect(control.ended(id, failed: false) == .count)
        #expect(control.settingUp == 0)
        #expect(control.summary(at: .seconds(10)) == nil)
    }

    @Test("queues of connections that moved on stay in proportion to the places")
    func bookkeepingStaysBounded() {
        var control = AdmissionControl(settings: AdmissionSettings(maximumSettingUp: 4))
        for index in 0..<100_000 {
            let id = control.arrived(from: Self.source(UInt8(index % 200)), at: .microseconds(index)).id
            control.progressed(id, to: .started)
            control.progressed(id, to: .hello)
            control.ended(id, failed: false)
        }
        #expect(control.settingUp == 0)
        #expect(control.queuedIDs <= 3 * (2 * 4 + 64))
    }

    @Test("the first bytes tell how long the first record is: a TLS record's header, a probe, anything else")
    func firstRecord() {
        #expect(FirstRecord.length([]) == nil)
        #expect(FirstRecord.length([0x16, 0x03, 0x01]) == nil)
        #expect(FirstRecord.length([0x16, 0x03, 0x01, 0x02, 0x00]) == 5 + 512)
        #expect(FirstRecord.length(Array("NE".utf8)) == Probe.question.count)
        #expect(FirstRecord.length(Array("GET".utf8)) == 1)
    }

    @Test("within a low descriptor limit, at most half the descriptors go to set-ups, and the share per source follows")
    func fitting() {
        let settings = AdmissionSettings(maximumSettingUp: 256, maximumPerSource: 32)
        #expect(settings.fitting(descriptors: nil) == settings)
        #expect(settings.fitting(descriptors: 20_000) == settings)
        #expect(settings.fitting(descriptors: 1024).maximumSettingUp == 256)
        #expect(settings.fitting(descriptors: 120).maximumSettingUp == 60)
        #expect(settings.fitting(descriptors: 40).maximumPerSource == 20)
        #expect(settings.fitting(descriptors: 1).maximumSettingUp == 1)
    }

    @Test("settings that cannot work are named")
    func settings() {
        #expect(AdmissionSettings().problem == nil)
        #expect(AdmissionSettings(maximumSettingUp: 0).problem?.contains("at least 1") == true)
        #expect(AdmissionSettings(maximumPerSource: 0).problem?.contains("per source") == true)
        #expect(AdmissionSettings(helloDeadline: .zero).problem?.contains("ClientHello") == true)
    }
}
