import Testing

@testable import nearby

/// `serve --accept ask`'s questions, driven by hand: lines with their arrival times and a
/// clock passed in. No terminal, no threads, no sleeping.
@Suite("admission prompt")
struct AdmissionPromptTests {
    typealias Prompt = AdmissionPrompt

    static let laptop = Prompt.Subject(name: "Laptop", peerID: "1EZA0R-5PQ2K8-XXXX", address: "198.18.1.2", trusted: false, code: nil)
    static let phone = Prompt.Subject(name: "Phone", peerID: "9R4X9V-44R7N6-YYYY", address: "198.18.1.3", trusted: false, code: nil)

    func ms(_ value: Int) -> Duration { .milliseconds(value) }

    /// The answers among `actions`, as (question, accepted).
    func answers(_ actions: [Prompt.Action]) -> [(Int, Bool)] {
        actions.compactMap { if case .answer(let number, let accepted) = $0 { (number, accepted) } else { nil } }
    }

    func shown(_ actions: [Prompt.Action]) -> [Int] {
        actions.compactMap { if case .show(let question, _) = $0 { question.number } else { nil } }
    }

    func ignored(_ actions: [Prompt.Action]) -> [String] {
        actions.compactMap { if case .notice(.ignored(_, let why)) = $0 { why } else { nil } }
    }

    @Test("a y typed before the question is ignored (and said so); only a line that arrives after the question answers it")
    func typeAhead() {
        var prompt = Prompt()
        // "y" arrives at 1 s while nothing is asked: it answers nothing.
        let early = prompt.receive("y", arrivedAt: ms(1000), at: ms(1000))
        #expect(answers(early).isEmpty)
        #expect(ignored(early) == ["nothing was being asked when it arrived"])
        // The stranger connects at 2 s: the question is shown, and nothing answers it yet.
        let asked = prompt.ask(1, about: Self.laptop, deadline: ms(32_000), at: ms(2000))
        #expect(shown(asked) == [1])
        #expect(answers(asked).isEmpty)
        // A line that arrived at 1.9 s but is handled only now (after the question was shown)
        // was typed ahead: ignored.
        let raced = prompt.receive("y", arrivedAt: ms(1900), at: ms(2001))
        #expect(answers(raced).isEmpty)
        #expect(ignored(raced).first?.contains("typed before question 1 was asked") == true)
        #expect(prompt.open?.question.number == 1)
        // A real answer.
        let answered = prompt.receive("y", arrivedAt: ms(4000), at: ms(4000))
        #expect(answers(answered).map(\.0) == [1] && answers(answered).map(\.1) == [true])
        #expect(prompt.open == nil)
    }

    @Test("a question that times out is declined; an answer after it answers nothing, and not the next question")
    func timeoutThenAnswer() {
        var prompt = Prompt()
        _ = prompt.ask(1, about: Self.laptop, deadline: ms(30_000), at: .zero)
        _ = prompt.ask(2, about: Self.phone, deadline: ms(45_000), at: ms(10_000))
        #expect(prompt.nextDeadline == ms(30_000))
        let expired = prompt.advance(to: ms(30_000))
        #expect(answers(expired).map(\.0) == [1] && answers(expired).map(\.1) == [false])
        #expect(expired.contains(.notice(.timedOut(Prompt.Question(number: 1, subject: Self.laptop, deadline: ms(30_000))))))
        // The next question waits out the pause: nothing is shown at once.
        #expect(shown(expired).isEmpty)
        #expect(prompt.nextDeadline == ms(31_000))
        // The late "y" for question 1 lands in the pause: it answers nothing.
        let late = prompt.receive("y", arrivedAt: ms(30_400), at: ms(30_400))
        #expect(answers(late).isEmpty)
        #expect(ignored(late) == ["nothing was being asked when it arrived"])
        // After the pause, question 2 is shown; it is answered only by a line that comes after.
        let next = prompt.advance(to: ms(31_000))
        #expect(shown(next) == [2])
        let answered = prompt.receive("n", arrivedAt: ms(33_000), at: ms(33_000))
        #expect(answers(answered).map(\.0) == [2] && answers(answered).map(\.1) == [false])
    }

    @Test("a line that arrived before the deadline but is handled after it still answers; one that arrived after it does not")
    func lateHandling() {
        var prompt = Prompt()
        _ = prompt.ask(1, about: Self.laptop, deadline: ms(30_000), at: .zero)
        let inTime = prompt.receive("yes", arrivedAt: ms(29_990), at: ms(30_010))
        #expect(answers(inTime).map(\.1) == [true])

        var other = Prompt()
        _ = other.ask(1, about: Self.laptop, deadline: ms(30_000), at: .zero)
        let tooLate = other.receive("yes", arrivedAt: ms(30_001), at: ms(30_002))
        #expect(answers(tooLate).map(\.0) == [1] && answers(tooLate).map(\.1) == [false])
    }

    @Test("two strangers in a row: one question at a time, each answer goes to the question that was open, a double y does not carry over")
    func twoStrangers() {
        var prompt = Prompt()
        let first = prompt.ask(1, about: Self.laptop, deadline: ms(30_000), at: .zero)
        let second = prompt.ask(2, about: Self.phone, deadline: ms(30_100), at: ms(100))
        #expect(shown(first) == [1] && shown(second).isEmpty)
        // "y" twice in one go: the first answers question 1, the second arrived before
        // question 2 was shown and answers nothing.
        let yes = prompt.receive("y", arrivedAt: ms(5000), at: ms(5000))
        #expect(answers(yes).map(\.0) == [1])
        let again = prompt.receive("y", arrivedAt: ms(5001), at: ms(5001))
        #expect(answers(again).isEmpty)
        let next = prompt.advance(to: ms(6001))
        #expect(shown(next) == [2])
        let no = prompt.receive("decline", arrivedAt: ms(7000), at: ms(7000))
        #expect(answers(no).map(\.0) == [2] && answers(no).map(\.1) == [false])
    }

    @Test("an answer may name its question (number or peer-ID prefix); named for another one, it answers nothing")
    func namedAnswers() {
        var prompt = Prompt()
        _ = prompt.ask(3, about: Self.laptop, deadline: ms(30_000), at: .zero)
        let wrong = prompt.receive("y 2", arrivedAt: ms(1000), at: ms(1000))
        #expect(answers(wrong).isEmpty)
        #expect(ignored(wrong).first?.contains("the open one is 3") == true)
        let wrongPeer = prompt.receive("accept 9R4X", arrivedAt: ms(1100), at: ms(1100))
        #expect(answers(wrongPeer).isEmpty)
        let tooShort = prompt.receive("y 1E", arrivedAt: ms(1200), at: ms(1200))
        #expect(answers(tooShort).isEmpty)
        let right = prompt.receive("accept 1eza0r", arrivedAt: ms(1300), at: ms(1300))
        #expect(answers(right).map(\.0) == [3] && answers(right).map(\.1) == [true])

        var numbered = Prompt()
        _ = numbered.ask(4, about: Self.phone, deadline: ms(30_000), at: .zero)
        #expect(answers(numbered.receive("n #4", arrivedAt: ms(10), at: ms(10))).map(\.0) == [4])
    }

    @Test("neither yes nor no: the question stays open and the person is told what to type; an empty line is no")
    func unclear() {
        var prompt = Prompt()
        _ = prompt.ask(1, about: Self.laptop, deadline: ms(30_000), at: .zero)
        let what = prompt.receive("maybe", arrivedAt: ms(10), at: ms(10))
        #expect(answers(what).isEmpty)
        #expect(what.contains { if case .notice(.unclear) = $0 { true } else { false } })
        #expect(prompt.open != nil)
        #expect(answers(prompt.receive("", arrivedAt: ms(20), at: ms(20))).map(\.1) == [false])
    }

    @Test("a peer that goes away withdraws its question; the next one comes after the pause")
    func withdrawn() {
        var prompt = Prompt()
        _ = prompt.ask(1, about: Self.laptop, deadline: ms(30_000), at: .zero)
        _ = prompt.ask(2, about: Self.phone, deadline: ms(30_000), at: .zero)
        let gone = prompt.withdraw(1, at: ms(2000))
        #expect(answers(gone).map(\.0) == [1] && answers(gone).map(\.1) == [false])
        #expect(shown(gone).isEmpty)
        #expect(answers(prompt.receive("y", arrivedAt: ms(2500), at: ms(2500))).isEmpty)
        #expect(shown(prompt.advance(to: ms(3000))) == [2])
        // Withdrawing a question that is only waiting, or one already answered, is harmless.
        #expect(prompt.withdraw(7, at: ms(3100)).isEmpty)
    }

    @Test("withdrawn at its deadline (the connection's timer fired first) is told as a timeout, not as the peer going away")
    func withdrawnAtDeadline() {
        var prompt = Prompt()
        _ = prompt.ask(1, about: Self.laptop, deadline: ms(4000), at: .zero)
        let question = Prompt.Question(number: 1, subject: Self.laptop, deadline: ms(4000))
        let atDeadline = prompt.withdraw(1, at: ms(3950))
        #expect(atDeadline.contains(.notice(.timedOut(question))))
        #expect(answers(atDeadline).map(\.1) == [false])
    }

    @Test("a question whose time runs out while it waits is declined without being shown")
    func expiredWhileWaiting() {
        var prompt = Prompt()
        _ = prompt.ask(1, about: Self.laptop, deadline: ms(30_000), at: .zero)
        _ = prompt.ask(2, about: Self.phone, deadline: ms(20_000), at: ms(1000))
        let expired = prompt.advance(to: ms(20_000))
        #expect(answers(expired).map(\.0) == [2] && answers(expired).map(\.1) == [false])
        #expect(shown(expired).isEmpty && prompt.open?.question.number == 1)
    }

    @Test("once input has ended nobody can answer: open, waiting and later questions are declined at once")
    func endOfInput() {
        var prompt = Prompt()
        _ = prompt.ask(1, about: Self.laptop, deadline: ms(30_000), at: .zero)
        _ = prompt.ask(2, about: Self.phone, deadline: ms(30_000), at: .zero)
        let ended = prompt.endOfInput(at: ms(100))
        #expect(answers(ended).map(\.0) == [1, 2] && answers(ended).allSatisfy { !$0.1 })
        let later = prompt.ask(3, about: Self.laptop, deadline: ms(60_000), at: ms(200))
        #expect(answers(later).map(\.0) == [3] && shown(later).isEmpty)
        #expect(prompt.nextDeadline == nil)
    }
}
