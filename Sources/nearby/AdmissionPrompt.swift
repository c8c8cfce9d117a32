/// The questions `serve --accept ask` puts to a person (or to a program on stdin) about who
/// gets in, and the lines that answer them, as a pure state machine: questions, lines and time
/// in; what to show, what to say and the answers out. The shell around it (``AdmissionDesk``)
/// reads stdin, prints, and keeps the clock.
///
/// The rules, each against a way an answer could end up admitting the wrong peer:
/// - One question is open at a time, and it names its peer; the others wait their turn.
/// - A line counts only for the question that was open when the line *arrived*: input typed
///   before a question was shown answers nothing (a "y" typed ahead cannot admit the next
///   stranger), and is reported as ignored.
/// - A question that runs out of time is declined; an answer that comes later answers nothing.
/// - Between one question ending and the next being shown there is a pause (``pause``), so an
///   answer meant for the one that just ended (timed out, or withdrawn because its peer went
///   away) lands in the pause, where it answers nothing, instead of on the next.
/// - An answer may name its question (`y 3`, or `y` and a peer-ID prefix); named for another
///   question, it answers nothing.
/// - Once input has ended, nobody can answer: every question is declined at once.
struct AdmissionPrompt {
    /// Who a question is about.
    struct Subject: Hashable, Sendable {
        var name: String
        var peerID: String?
        var address: String
        var trusted: Bool
        /// Pairing: the 6-digit code both devices show.
        var code: String?
    }

    struct Question: Hashable, Sendable {
        let number: Int
        let subject: Subject
        /// Declined when still open at this time.
        let deadline: Duration
    }

    /// Things said to the person besides the questions.
    enum Notice: Hashable, Sendable {
        /// A line that answers nothing, and why.
        case ignored(line: String, why: String)
        /// A line that is neither yes nor no; the question stays open.
        case unclear(line: String, question: Question)
        case answered(Question, accepted: Bool)
        /// Open until its deadline without an answer: declined.
        case timedOut(Question)
        /// Its time ran out while it waited behind other questions.
        case expiredUnasked(Question)
        /// Its peer went away before an answer.
        case withdrawn(Question)
        /// Input ended: nobody can answer this one.
        case noInput(Question)
    }

    enum Action: Hashable, Sendable {
        /// Show this question; it must be answered within `remaining`.
        case show(Question, remaining: Duration)
        /// The decision for question `number`.
        case answer(number: Int, accepted: Bool)
        case notice(Notice)
    }

    /// The pause between one question ending and the next being shown.
    let pause: Duration

    /// The question shown now, and when it was shown.
    private(set) var open: (question: Question, shownAt: Duration)?
    private var waiting: [Question] = []
    /// No question is shown before this (the pause after the last one).
    private var quietUntil: Duration = .zero
    private var inputEnded = false

    init(pause: Duration = .seconds(1)) {
        self.pause = pause
    }

    /// When ``advance(to:)`` next has something to do, if ever.
    var nextDeadline: Duration? {
        var times = waiting.map(\.deadline)
        if let open { times.append(open.question.deadline) } else if !waiting.isEmpty { times.append(quietUntil) }
        return times.min()
    }

    /// A new question, numbered by the caller, due by `deadline`.
    mutating func ask(_ number: Int, about subject: Subject, deadline: Duration, at now: Duration) -> [Action] {
        let question = Question(number: number, subject: subject, deadline: deadline)
        if inputEnded { return [.notice(.noInput(question)), .answer(number: number, accepted: false)] }
        waiting.append(question)
        return advance(to: now)
    }

    /// The peer of question `number` went away (or the caller stopped waiting). At its
    /// deadline that is the connection giving up on the answer, which the person is told as
    /// a timeout: the connection's timer and this prompt's may fire in either order.
    mutating func withdraw(_ number: Int, at now: Duration) -> [Action] {
        func timeIsUp(_ question: Question) -> Bool { now + Self.deadlineTolerance >= question.deadline }
        if let open, open.question.number == number {
            self.open = nil
            quietUntil = now + pause
            let notice: Notice = timeIsUp(open.question) ? .timedOut(open.question) : .withdrawn(open.question)
            return [.notice(notice), .answer(number: number, accepted: false)] + advance(to: now)
        }
        guard let index = waiting.firstIndex(where: { $0.number == number }) else { return [] }
        let question = waiting.remove(at: index)
        let notice: Notice = timeIsUp(question) ? .expiredUnasked(question) : .withdrawn(question)
        return [.notice(notice), .answer(number: number, accepted: false)]
    }

    /// How close to its deadline a withdrawal counts as the question's time running out.
    static let deadlineTolerance: Duration = .milliseconds(100)

    /// A line of input that arrived at `arrival` (read by another thread; handled `now`).
    mutating func receive(_ line: String, arrivedAt arrival: Duration, at now: Duration) -> [Action] {
        // A question that timed out before the line arrived is not its question. (Nothing is
        // shown "at" the arrival time: that would let the line answer a question it preceded.)
        var actions = expire(at: arrival)
        let words = line.lowercased().split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard let open else {
            return actions + [.notice(.ignored(line: line, why: "nothing was being asked when it arrived"))] + advance(to: now)
        }
        guard arrival > open.shownAt else {
            return actions + [.notice(.ignored(line: line, why: "it was typed before question \(open.question.number) was asked; answer it again"))]
                + advance(to: now)
        }
        guard let accepted = Self.verdict(words.first ?? "") else {
            return actions + [.notice(.unclear(line: line, question: open.question))] + advance(to: now)
        }
        if words.count > 1 {
            let target = words.dropFirst().joined()
            guard Self.names(target, open.question) else {
                return actions
                    + [.notice(.ignored(line: line, why: "it names a question that is not open (the open one is \(open.question.number), about \"\(open.question.subject.name)\")"))]
                    + advance(to: now)
            }
        }
        self.open = nil
        quietUntil = arrival + pause
        actions += [.notice(.answered(open.question, accepted: accepted)), .answer(number: open.question.number, accepted: accepted)]
        return actions + advance(to: now)
    }

    /// Input ended: the open question and every waiting one are declined, and so is every later one.
    mutating func endOfInput(at now: Duration) -> [Action] {
        inputEnded = true
        var actions: [Action] = []
        for question in (open.map { [$0.question] } ?? []) + waiting {
            actions += [.notice(.noInput(question)), .answer(number: question.number, accepted: false)]
        }
        open = nil
        waiting = []
        return actions
    }

    /// Time passes: questions run out of time; after the pause, the next one is shown.
    mutating func advance(to now: Duration) -> [Action] {
        var actions = expire(at: now)
        if open == nil, now >= quietUntil, !waiting.isEmpty {
            let next = waiting.removeFirst()
            open = (next, now)
            actions.append(.show(next, remaining: next.deadline - now))
        }
        return actions
    }

    /// Declines the questions whose time is up at `now`.
    private mutating func expire(at now: Duration) -> [Action] {
        var actions: [Action] = []
        if let open, now >= open.question.deadline {
            self.open = nil
            quietUntil = open.question.deadline + pause
            actions += [.notice(.timedOut(open.question)), .answer(number: open.question.number, accepted: false)]
        }
        while let index = waiting.firstIndex(where: { now >= $0.deadline }) {
            let question = waiting.remove(at: index)
            actions += [.notice(.expiredUnasked(question)), .answer(number: question.number, accepted: false)]
        }
        return actions
    }

    /// Yes or no, or nil for anything else. An empty line is the default, no.
    static func verdict(_ word: String) -> Bool? {
        switch word {
        case "y", "yes", "accept": true
        case "", "n", "no", "decline": false
        default: nil
        }
    }

    /// Whether the words after the answer name `question`: its number (`3` or `#3`) or the
    /// beginning of its peer ID (at least 4 characters, dashes and case ignored).
    static func names(_ target: String, _ question: Question) -> Bool {
        let plain = target.hasPrefix("#") ? String(target.dropFirst()) : target
        if let number = Int(plain) { return number == question.number }
        let typed = plain.filter { $0 != "-" }.uppercased()
        guard typed.count >= 4, let peerID = question.subject.peerID else { return false }
        return peerID.filter { $0 != "-" }.uppercased().hasPrefix(typed)
    }
}
