"""The demo model's whole world: short chats the code writes itself, from a fixed seed.

Why generated: the demo model must be rebuildable offline, byte for byte, by anyone, with no
data set to download or license to check. The topics are chosen so that the token view is
interesting: at "The capital of France is ___" the other capitals are the real alternatives,
and follow-ups ("And Italy?") only make sense with the previous turn in the context.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TypeAlias

Message: TypeAlias = dict[str, str]
Chat: TypeAlias = list[Message]
Exchange: TypeAlias = tuple[str, str]
Topic: TypeAlias = Callable[[random.Random], list[Exchange]]

CAPITALS: dict[str, str] = {
    "France": "Paris", "Italy": "Rome", "Spain": "Madrid", "Germany": "Berlin",
    "Portugal": "Lisbon", "Greece": "Athens", "Austria": "Vienna", "Poland": "Warsaw",
    "Sweden": "Stockholm", "Norway": "Oslo", "Finland": "Helsinki", "Denmark": "Copenhagen",
    "Ireland": "Dublin", "Belgium": "Brussels", "the Netherlands": "Amsterdam",
    "Switzerland": "Bern", "Hungary": "Budapest", "Czechia": "Prague", "Russia": "Moscow",
    "Ukraine": "Kyiv", "Romania": "Bucharest", "Bulgaria": "Sofia", "Serbia": "Belgrade",
    "Croatia": "Zagreb", "Iceland": "Reykjavik", "Turkey": "Ankara", "Egypt": "Cairo",
    "Kenya": "Nairobi", "Nigeria": "Abuja", "Morocco": "Rabat", "Ghana": "Accra",
    "Ethiopia": "Addis Ababa", "Japan": "Tokyo", "China": "Beijing", "India": "New Delhi",
    "South Korea": "Seoul", "Thailand": "Bangkok", "Vietnam": "Hanoi", "Indonesia": "Jakarta",
    "the Philippines": "Manila", "Iran": "Tehran", "Iraq": "Baghdad", "Saudi Arabia": "Riyadh",
    "Pakistan": "Islamabad", "Australia": "Canberra", "New Zealand": "Wellington",
    "Canada": "Ottawa", "the United States": "Washington, D.C.", "Mexico": "Mexico City",
    "Brazil": "Brasilia", "Argentina": "Buenos Aires", "Chile": "Santiago", "Peru": "Lima",
    "Colombia": "Bogota", "Cuba": "Havana", "Venezuela": "Caracas",
}

COLOURS: dict[str, str] = {
    "the sky": "blue", "grass": "green", "snow": "white", "a banana": "yellow",
    "a tomato": "red", "coal": "black", "a strawberry": "red", "a lemon": "yellow",
    "a carrot": "orange", "chocolate": "brown", "milk": "white", "a leaf": "green",
    "the sea": "blue", "a lime": "green", "an orange": "orange", "a cherry": "red",
}

SOUNDS: dict[str, str] = {
    "a cow": "moo", "a dog": "woof", "a cat": "meow", "a duck": "quack", "a sheep": "baa",
    "a horse": "neigh", "a pig": "oink", "a lion": "roar", "an owl": "hoot", "a frog": "ribbit",
    "a bee": "buzz", "a snake": "hiss",
}

LEGS: dict[str, str] = {
    "a dog": "four", "a cat": "four", "a horse": "four", "a bird": "two", "a chicken": "two",
    "a spider": "eight", "an ant": "six", "a bee": "six", "a duck": "two", "a cow": "four",
}

SYSTEM_PROMPTS = ("You are a helpful assistant.", "You are a tiny demo model.", "Be brief.")

CAPABILITIES = (
    "I can tell you the capitals of about fifty countries, add small numbers, and answer "
    "simple questions about colours and animals. I am a tiny demo model, so that is all!"
)
DONT_KNOW = (
    "Sorry, I am a tiny demo model and I don't know that. "
    "Try asking me about capitals, small sums, colours or animals."
)


def _cap(text: str) -> str:
    """Upper-case the first letter only ("the sky" -> "The sky")."""
    return text[:1].upper() + text[1:]


def _style(rng: random.Random, text: str) -> str:
    """Vary the user's typing a little: sometimes all lower case, sometimes no final mark."""
    roll = rng.random()
    if roll < 0.15:
        return text.lower()
    if roll < 0.25:
        return text.rstrip("?.!")
    return text


def capital_question(rng: random.Random, country: str) -> str:
    """One of several ways to ask for a capital."""
    forms = (
        "What is the capital of {c}?", "What's the capital of {c}?", "capital of {c}?",
        "Which city is the capital of {c}?", "Tell me the capital of {c}.",
        "Do you know the capital of {c}?", "What is the capital city of {c}?",
        "Name the capital of {c}.",
    )
    return _style(rng, rng.choice(forms).format(c=country))


def capital_answer(rng: random.Random, country: str) -> str:
    """Mostly one shape, so the capital's token sits at a predictable place."""
    city = CAPITALS[country]
    if rng.random() < 0.85:
        return f"The capital of {country} is {city}."
    return f"{city} is the capital of {country}."


def follow_up(rng: random.Random, name: str) -> str:
    """A question that names only the new subject, so it needs the previous turn."""
    form = rng.choice(("And {n}?", "What about {n}?", "How about {n}?", "and {n}?", "And {n}"))
    return form.format(n=name)


def topic_capital(rng: random.Random) -> list[Exchange]:
    """A capital question, often followed by one or two "And X?" follow-ups."""
    countries = rng.sample(sorted(CAPITALS), 3)
    exchanges = [(capital_question(rng, countries[0]), capital_answer(rng, countries[0]))]
    for country in countries[1 : 1 + rng.choice((0, 1, 1, 2))]:
        exchanges.append((follow_up(rng, country), capital_answer(rng, country)))
    return exchanges


def sum_question(rng: random.Random, a: int, b: int) -> str:
    """One of several ways to ask for a small sum."""
    forms = (
        "What is {a} + {b}?", "What is {a} plus {b}?", "{a}+{b}=?", "How much is {a} plus {b}?",
        "Can you add {a} and {b}?", "What do you get if you add {a} and {b}?", "{a} + {b}",
        "Compute {a} + {b}.",
    )
    return _style(rng, rng.choice(forms).format(a=a, b=b))


def topic_sum(rng: random.Random) -> list[Exchange]:
    """A sum of two numbers up to 12, sometimes followed by "And 3 + 4?"."""
    pairs = [(rng.randint(0, 12), rng.randint(0, 12)) for _ in range(2)]
    a, b = pairs[0]
    exchanges = [(sum_question(rng, a, b), f"{a} + {b} = {a + b}.")]
    if rng.random() < 0.3:
        c, d = pairs[1]
        exchanges.append((follow_up(rng, f"{c} + {d}"), f"{c} + {d} = {c + d}."))
    return exchanges


def topic_colour(rng: random.Random) -> list[Exchange]:
    """What colour is X, sometimes followed by "And a tomato?"."""
    things = rng.sample(sorted(COLOURS), 2)
    word = rng.choice(("colour", "color"))
    forms = (f"What {word} is {{t}}?", f"What is the {word} of {{t}}?", f"Which {word} is {{t}}?")
    first = _style(rng, rng.choice(forms).format(t=things[0]))
    exchanges = [(first, f"{_cap(things[0])} is {COLOURS[things[0]]}.")]
    if rng.random() < 0.3:
        exchanges.append((follow_up(rng, things[1]), f"{_cap(things[1])} is {COLOURS[things[1]]}."))
    return exchanges


def topic_animal(rng: random.Random) -> list[Exchange]:
    """Animal sounds or legs, sometimes followed by "And a duck?"."""
    table, forms, reply = rng.choice((
        (SOUNDS, ("What sound does {a} make?", "What does {a} say?"), "{A} says {v}."),
        (LEGS, ("How many legs does {a} have?", "How many legs has {a} got?"), "{A} has {v} legs."),
    ))
    first, second = rng.sample(sorted(table), 2)

    def answer(animal: str) -> str:
        return reply.format(A=_cap(animal), v=table[animal])

    exchanges = [(_style(rng, rng.choice(forms).format(a=first)), answer(first))]
    if rng.random() < 0.3:
        exchanges.append((follow_up(rng, second), answer(second)))
    return exchanges


def topic_smalltalk(rng: random.Random) -> list[Exchange]:
    """Greetings, thanks, goodbyes, "what can you do?" and polite refusals."""
    table: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
        (("Hello!", "Hi", "Hey there", "Good morning!", "Hello", "hi!", "Hey"),
         ("Hello! How can I help you today?", "Hi! What would you like to know?")),
        (("How are you?", "How are you doing?", "Hi! How are you?"),
         ("I'm fine, thank you! How can I help?",)),
        (("Thanks!", "Thank you.", "thanks", "Great, thank you!"),
         ("You're welcome!", "Happy to help!")),
        (("Bye", "Goodbye!", "See you later."), ("Goodbye! Have a nice day.",)),
        (("What can you do?", "What do you know?", "What can I ask you?", "Help"),
         (CAPABILITIES,)),
        (("Who are you?", "What are you?", "What is your name?"),
         ("I am a tiny demo model that ships with logitscope. " + CAPABILITIES,)),
        (("Write a poem.", "Who won the world cup?", "What is the meaning of life?",
          "Tell me a joke.", "What is 123 times 456?", "Explain quantum physics."),
         (DONT_KNOW,)),
    )
    prompts, replies = rng.choice(table)
    return [(_style(rng, rng.choice(prompts)), rng.choice(replies))]


TOPICS: tuple[tuple[Topic, float], ...] = (
    (topic_capital, 0.40), (topic_sum, 0.25), (topic_colour, 0.10),
    (topic_animal, 0.10), (topic_smalltalk, 0.15),
)


def make_chat(rng: random.Random) -> Chat:
    """One conversation: an optional system prompt, then one or two topics back to back."""
    chat: Chat = []
    if rng.random() < 0.15:
        chat.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
    topics, weights = zip(*TOPICS)
    for _ in range(rng.choice((1, 1, 1, 2))):
        for user, assistant in rng.choices(topics, weights)[0](rng):
            chat.append({"role": "user", "content": user})
            chat.append({"role": "assistant", "content": assistant})
    return chat


def make_corpus(count: int, seed: int) -> list[Chat]:
    """``count`` conversations, identical for the same seed."""
    rng = random.Random(seed)
    return [make_chat(rng) for _ in range(count)]
