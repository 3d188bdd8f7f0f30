"""The questionnaire both runner apps (Flask and ASGI) serve."""

QUESTIONS = [
    "How did you hear about us?",
    "How often do you use the product?",
    "What do you like most?",
    "What should we improve?",
    "Would you recommend us?",
]
PAGES = len(QUESTIONS)
ANSWER_MAX = 500
