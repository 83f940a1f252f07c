"""Procedural children's stories: the demo model's whole training corpus.

Every story is built from templates with a fixed seed, so the corpus is the same on every machine and
needs no download. One hero per story (and at most one friend) keeps names from drifting: the model
sees each name used consistently from the first sentence to the last.
"""

import random

NAMES = [
    "Lily", "Tom", "Mia", "Ben", "Anna", "Max", "Sara", "Sam", "Lucy", "Jack", "Emma", "Leo", "Zoe",
    "Tim", "Ella", "Finn", "Ruby", "Noah", "Amy", "Jake", "Nina", "Oscar", "Rosa", "Kai", "Daisy", "Henry",
    "Grace", "Peter", "Molly", "Harry", "Chloe", "Danny", "Polly", "Billy", "Sophie", "Ziggy",
]
PRONOUNS = {
    "Lily": "she", "Mia": "she", "Anna": "she", "Sara": "she", "Lucy": "she", "Emma": "she", "Zoe": "she",
    "Ella": "she", "Ruby": "she", "Amy": "she", "Nina": "she", "Rosa": "she", "Daisy": "she", "Grace": "she",
    "Molly": "she", "Chloe": "she", "Polly": "she", "Sophie": "she", "Ziggy": "she",
}
ANIMALS = ["dog", "cat", "bird", "rabbit", "frog", "duck", "fox", "bear", "mouse", "turtle", "horse", "owl", "squirrel", "goat",
    "puppy", "kitten", "lion", "monkey", "pig", "cow", "sheep", "bee", "butterfly", "dragon"]
PLACES = [
    ("park", "in the park"), ("forest", "in the forest"), ("beach", "at the beach"), ("farm", "on the farm"),
    ("garden", "in the garden"), ("town", "in a small town"), ("lake", "by the lake"), ("hill", "on a green hill"),
    ("school", "at school"), ("village", "in a quiet village"), ("river", "by the river"),
    ("castle", "in an old castle"), ("zoo", "at the zoo"), ("jungle", "in the jungle"), ("city", "in a busy city"),
    ("meadow", "in a sunny meadow"), ("mountain", "on a big mountain"), ("house", "in a little house"),
]
OBJECTS = [
    ("ball", "red"), ("kite", "blue"), ("hat", "yellow"), ("box", "little"), ("book", "old"), ("shell", "shiny"),
    ("key", "gold"), ("boat", "toy"), ("flower", "pink"), ("cake", "big"), ("drum", "loud"), ("bike", "green"),
    ("doll", "soft"), ("car", "fast"), ("balloon", "purple"), ("crown", "sparkly"), ("teddy bear", "brown"),
    ("map", "secret"), ("lamp", "magic"), ("wagon", "wooden"), ("whistle", "silver"), ("blanket", "warm"),
    ("cup", "white"), ("sock", "striped"),
]
FEELINGS = ["happy", "sad", "scared", "excited", "tired", "proud", "surprised", "brave", "curious", "bored", "cheerful", "shy"]
WEATHER = [
    "The sun was bright and warm.", "It was a windy day.", "The sky was grey and it began to rain.",
    "It was a cold morning.", "The birds were singing in the trees.", "Snow was falling softly.",
    "The moon was big and round.", "Leaves were falling from the trees.", "The air smelled of fresh bread.",
    "There was a rainbow in the sky.", "It was very hot, and the flowers were thirsty.",
]
ACTIVITIES = [
    "{they_cap} liked to sing songs and dance with {their} friends.",
    "Every morning, {they} ate an apple and drank a glass of milk.",
    "{they_cap} liked to draw pictures of the sun, the sea and the stars.",
    "{they_cap} liked to count the clouds and name them.",
    "{their_cap} mom made soup and pie for dinner every Sunday.",
    "{their_cap} grandma told {them} funny stories before bed.",
    "{they_cap} liked to build towers with blocks and knock them down.",
    "{they_cap} liked to splash in puddles and catch bugs.",
    "{they_cap} wanted to learn how to swim, climb and fly a plane.",
]
PROBLEMS = [
    ("lost", "could not find the {obj} anywhere", "looked under the bed, behind the door and in the grass"),
    ("stuck", "saw that the {obj} was stuck in a tall tree", "tried to jump, but the tree was too tall"),
    ("broken", "dropped the {obj} and it broke", "tried to fix it with tape and glue"),
    ("far", "saw the {obj} float away on the water", "ran along the shore as fast as {they} could"),
]
HELP = [
    "climbed up and brought it down", "found it under a big leaf", "helped to fix it",
    "pulled it back with a long stick", "showed where it was",
]
MORALS = [
    "Friends help each other.", "It is good to share.", "Being kind makes everyone happy.",
    "Never give up.", "It is okay to ask for help.", "Being brave is not the same as not being scared.",
    "Saying sorry makes things right.", "Good things come to those who wait.",
]
ENDINGS = [
    "From that day on, {hero} and the {animal} were best friends.",
    "{Hero_they} went home with a big smile.",
    "That night, {hero} slept with the {obj} close by.",
    "{hero} and the {animal} played until the sun went down.",
]
OPENINGS = [
    "Once upon a time, there was a {feel} {kind} named {hero}.",
    "Once upon a time, {place_in}, there lived a {kind} named {hero}.",
    "One day, a {kind} named {hero} went to the {place}.",
    "There was once a little {kind} named {hero} who loved {obj_plural}.",
]
REQUESTS = [
    "Tell me a story about {hero}.",
    "Tell me a story about a {animal}.",
    "Write a short story about {hero} and a {animal}.",
    "Tell me a story about a {adj} {obj}.",
    "Can you tell me a story {place_in}?",
    "Tell me a story about being {moral_word}.",
]
MORAL_WORDS = {
    "Friends help each other.": "a good friend", "It is good to share.": "kind",
    "Being kind makes everyone happy.": "kind", "Never give up.": "brave",
    "It is okay to ask for help.": "a good friend", "Being brave is not the same as not being scared.": "brave",
    "Saying sorry makes things right.": "sorry", "Good things come to those who wait.": "patient",
}


def plural(word: str) -> str:
    return word + ("es" if word.endswith(("x", "sh")) else "s")


def story(rng: random.Random) -> tuple[str, str]:
    """Returns (a request a person could have typed, the story that answers it)."""
    hero = rng.choice(NAMES)
    they = PRONOUNS.get(hero, "he")
    them = "her" if they == "she" else "him"
    their = "her" if they == "she" else "his"
    kind = rng.choice(["girl", "little girl"]) if they == "she" else rng.choice(["boy", "little boy"])
    animal = rng.choice(ANIMALS)
    place, place_in = rng.choice(PLACES)
    obj, adj = rng.choice(OBJECTS)
    feel = rng.choice([f for f in FEELINGS if f not in ('sad', 'scared', 'tired', 'bored')])
    problem_kind, problem, attempt = rng.choice(PROBLEMS)
    moral = rng.choice(MORALS)
    fields = dict(
        hero=hero, they=they, them=them, their=their, kind=kind, animal=animal, place=place, place_in=place_in,
        obj=obj, adj=adj, feel=feel, obj_plural=plural(obj), Hero_they=they.capitalize(),
        they_cap=they.capitalize(), their_cap=their.capitalize(),
    )
    s = []
    s.append(rng.choice(OPENINGS).format(**fields))
    s.append(rng.choice(WEATHER))
    if rng.random() < 0.6:
        s.append(rng.choice(ACTIVITIES).format(**fields))
    s.append(f"{hero} had a {adj} {obj}. {they.capitalize()} loved to play with it {place_in}.")
    s.append(f"One day, {hero} {problem.format(**fields)}.")
    s.append(f"{hero} felt {rng.choice(['sad', 'scared', 'worried'])}. {they.capitalize()} {attempt.format(**fields)}.")
    s.append(
        rng.choice(
            [
                f'"Oh no," said {hero}. "What can I do?"',
                f'"Where is my {obj}?" {hero} cried.',
                f'"I need help," said {hero}.',
            ]
        )
    )
    s.append(f"Then a {animal} came by. \"Why are you {rng.choice(['sad', 'crying', 'upset'])}?\" asked the {animal}.")
    s.append(f'"My {obj} is {problem_kind}," said {hero}.')
    s.append(f'"I can help you," said the {animal}. The {animal} {rng.choice(HELP)}.')
    s.append(f"{hero} was so {rng.choice(['happy', 'glad', 'excited'])}. \"Thank you!\" {they} said.")
    if rng.random() < 0.5:
        s.append(f"{hero} gave the {animal} a {rng.choice(['hug', 'big hug', 'piece of cake', 'flower'])}.")
    s.append(ENDINGS[rng.randrange(len(ENDINGS))].format(**fields))
    if rng.random() < 0.7:
        s.append(f"{hero} learned that day: {moral[0].lower() + moral[1:]}" if rng.random() < 0.5 else moral)
    request = rng.choice(REQUESTS).format(moral_word=MORAL_WORDS[moral], **fields)
    return request, " ".join(s)


def stories(count: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [story(rng) for _ in range(count)]


if __name__ == "__main__":
    import re

    sample = stories(2000, 1)
    for request, text in sample[:3]:
        print(request, "\n", text, "\n")
    words = set()
    for request, text in sample:
        words.update(re.findall(r"[A-Za-z']+", request + " " + text))
    print(len(words), "distinct words;", sum(len(t) for _, t in sample) / len(sample), "chars per story")
